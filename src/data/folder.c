#include "folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/base.h"

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec_t;

static int strvec_push(strvec_t *s, char *str)
{
    if (!str)
        return SL_ENOMEM;
    if (sl__array_reserve(&s->v, &s->cap, s->n + 1, sizeof *s->v, 64)) {
        free(str);
        return SL_ENOMEM;
    }
    s->v[s->n++] = str;
    return 0;
}

static void strvec_free(strvec_t *s)
{
    sl__strv_free(s->v, (int64_t)s->n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p)
        return NULL;
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

int sl__folder_is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return 0;
    return !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
           !strcasecmp(dot, ".png");
}

/* Sorted entries of dir: sub-folders into dirs, image files into files
 * (names only). Follows symlinks, as torchvision does. */
static int list_dir(const char *dir, strvec_t *dirs, strvec_t *files, char *err,
                    size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot open folder: %s", dir,
                        strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *full = join(dir, e->d_name);
        if (!full) {
            rc = SL_ENOMEM;
            break;
        }
        struct stat st;
        int is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        free(full);
        if (is_dir && dirs)
            rc = strvec_push(dirs, strdup(e->d_name));
        else if (!is_dir && files && sl__folder_is_image_name(e->d_name))
            rc = strvec_push(files, strdup(e->d_name));
    }
    closedir(d);
    if (dirs && dirs->n)
        qsort(dirs->v, dirs->n, sizeof(char *), cmp_str);
    if (files && files->n)
        qsort(files->v, files->n, sizeof(char *), cmp_str);
    return rc ? sl__fail(err, errlen, rc, "%s: out of memory", dir) : 0;
}

/* Walks rel (relative to root) recursively: files of a folder first, then
 * its sub-folders, each sorted (os.walk order with sorted names). */
static int walk(const char *root, const char *rel, int depth, int64_t label,
                strvec_t *paths, int64_t **labels, size_t *lcap, char *err,
                size_t errlen)
{
    if (depth > 32)
        return 0; /* a symlink loop; torchvision would recurse forever */
    char *abs = join(root, rel);
    if (!abs)
        return SL_ENOMEM;
    strvec_t dirs = {0}, files = {0};
    int rc = list_dir(abs, &dirs, &files, err, errlen);
    free(abs);
    for (size_t i = 0; !rc && i < files.n; i++) {
        if (sl__array_reserve(labels, lcap, paths->n + 1, sizeof **labels,
                              1024)) {
            rc = SL_ENOMEM;
            break;
        }
        (*labels)[paths->n] = label;
        rc = strvec_push(paths, join(rel, files.v[i]));
    }
    for (size_t i = 0; !rc && i < dirs.n; i++) {
        char *sub = join(rel, dirs.v[i]);
        if (!sub) {
            rc = SL_ENOMEM;
            break;
        }
        rc =
            walk(root, sub, depth + 1, label, paths, labels, lcap, err, errlen);
        free(sub);
    }
    strvec_free(&dirs);
    strvec_free(&files);
    return rc;
}

int sl__folder_scan(const char *root, sl__folder_t **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    strvec_t classes = {0}, paths = {0};
    int64_t *labels = NULL;
    size_t lcap = 0;
    int rc = list_dir(root, &classes, NULL, err, errlen);
    if (rc)
        return rc;
    if (classes.n == 0) {
        strvec_free(&classes);
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "%s: no class folders (expected root/<class>/<image>)",
                        root);
    }
    for (size_t c = 0; !rc && c < classes.n; c++)
        rc = walk(root, classes.v[c], 0, (int64_t)c, &paths, &labels, &lcap,
                  err, errlen);
    if (!rc && paths.n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no .jpg/.jpeg/.png files in any class folder", root);
    sl__folder_t *f = rc ? NULL : calloc(1, sizeof *f);
    if (!rc && !f)
        rc = SL_ENOMEM;
    if (rc) {
        strvec_free(&classes);
        strvec_free(&paths);
        free(labels);
        if (rc == SL_ENOMEM)
            sl__fail(err, errlen, rc, "%s: out of memory", root);
        return rc;
    }
    f->root = strdup(root);
    f->nclasses = (int)classes.n;
    f->classes = classes.v;
    f->n = (int64_t)paths.n;
    f->paths = paths.v;
    f->labels = labels;
    *out = f;
    return 0;
}

void sl__folder_free(sl__folder_t *f)
{
    if (!f)
        return;
    sl__strv_free(f->classes, f->nclasses);
    sl__strv_free(f->paths, f->n);
    free(f->labels);
    free(f->root);
    free(f);
}
