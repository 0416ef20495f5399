#include "folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
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

/* What torchvision's ImageFolder also lists (IMG_EXTENSIONS) that sluice
 * does not decode: such files are left out, counted per extension, and
 * named in one warning, so a count that differs from torchvision's says
 * why. The other extensions are ignored, as torchvision ignores them. */
static const char *const foreign_ext[] = {".bmp", ".pgm",  ".ppm",
                                          ".tif", ".tiff", ".webp"};
enum { NFOREIGN = sizeof foreign_ext / sizeof foreign_ext[0] };

/* The foreign_ext index of name's extension (any case), or -1. */
static int foreign_index(const char *name)
{
    const char *dot = strrchr(name, '.');
    for (int k = 0; dot && k < NFOREIGN; k++)
        if (!strcasecmp(dot, foreign_ext[k]))
            return k;
    return -1;
}

/* The folders walked so far, by (device, inode): each is walked once, so a
 * symlink loop or a second link to a folder adds nothing twice. Open
 * addressing; `rel` names the first path it was reached by. */
typedef struct seen_dir {
    dev_t dev;
    ino_t ino;
    char *rel; /* NULL: empty slot */
} seen_dir_t;

typedef struct scan {
    const char *root;
    int skip_bad;
    strvec_t paths;
    int64_t *labels;
    size_t lcap;
    sl__folder_note_t *notes;
    size_t nnotes, ncap;
    int64_t foreign[NFOREIGN]; /* files per foreign_ext */
    char *foreign_first;       /* the first by path, relative to root */
    seen_dir_t *seen;
    size_t nseen, seencap; /* seencap: a power of two */
    char *err;
    size_t errlen;
} scan_t;

static size_t seen_hash(dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev;
    return (size_t)(h ^ (h >> 29));
}

static seen_dir_t *seen_slot(seen_dir_t *v, size_t cap, dev_t dev, ino_t ino)
{
    size_t i = seen_hash(dev, ino) & (cap - 1);
    while (v[i].rel && !(v[i].dev == dev && v[i].ino == ino))
        i = (i + 1) & (cap - 1);
    return &v[i];
}

/* Marks (dev, ino) seen as rel. @return 0 when new, 1 with *first (the
 * path it was first reached by) when seen before, or SL_ENOMEM. */
static int seen_add(scan_t *sc, dev_t dev, ino_t ino, const char *rel,
                    const char **first)
{
    if (2 * (sc->nseen + 1) > sc->seencap) {
        size_t cap = sc->seencap ? 2 * sc->seencap : 64;
        seen_dir_t *v = calloc(cap, sizeof *v);
        if (!v)
            return SL_ENOMEM;
        for (size_t i = 0; i < sc->seencap; i++)
            if (sc->seen[i].rel)
                *seen_slot(v, cap, sc->seen[i].dev, sc->seen[i].ino) =
                    sc->seen[i];
        free(sc->seen);
        sc->seen = v;
        sc->seencap = cap;
    }
    seen_dir_t *e = seen_slot(sc->seen, sc->seencap, dev, ino);
    if (e->rel) {
        *first = e->rel;
        return 1;
    }
    if (!(e->rel = strdup(rel)))
        return SL_ENOMEM;
    e->dev = dev;
    e->ino = ino;
    sc->nseen++;
    return 0;
}

/* Keeps msg (taken, freed on failure) as a note, its control bytes
 * escaped: it names files, and is printed. */
static int add_note(scan_t *sc, int lost, char *msg)
{
    char *esc = msg ? sl__msg_escape_dup(msg) : NULL;
    free(msg);
    if (!esc || sl__array_reserve(&sc->notes, &sc->ncap, sc->nnotes + 1,
                                  sizeof *sc->notes, 16)) {
        free(esc);
        return SL_ENOMEM;
    }
    sc->notes[sc->nnotes++] = (sl__folder_note_t){esc, lost};
    return 0;
}

/* Under fail, the scan's error naming rel: in a fixed buffer, so a path
 * too long for it (a folder past PATH_MAX) loses its middle, not the
 * cause at the end. */
static int fail_entry(scan_t *sc, const char *rel, const char *cause)
{
    char *path = sl__path_join(sc->root, rel);
    if (!path)
        return SL_ENOMEM;
    size_t n = strlen(path), c = strlen(cause);
    size_t room = sc->errlen > c + 100 ? sc->errlen - c - 3 : 0;
    if (room && n >= room) {
        size_t head = 40, tail = room - head - 4;
        sl__fail(sc->err, sc->errlen, SL_EIO, "%.*s...%s: %s", (int)head, path,
                 path + n - tail, cause);
    } else {
        sl__fail(sc->err, sc->errlen, SL_EIO, "%s: %s", path, cause);
    }
    free(path);
    return SL_EIO;
}

/* A bad entry (lost = 1: samples left out) or a warning (lost = 0), kept
 * as "ROOT/REL: cause". Under fail a lost entry is the scan's error. */
static int note(scan_t *sc, int lost, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int note(scan_t *sc, int lost, const char *rel, const char *fmt, ...)
{
    char cause[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cause, sizeof cause, fmt, ap);
    va_end(ap);
    if (lost && !sc->skip_bad)
        return fail_entry(sc, rel, cause);
    char *msg = NULL;
    if (asprintf(&msg, "%s/%s: %s", sc->root, rel, cause) < 0)
        return SL_ENOMEM;
    return add_note(sc, lost, msg);
}

/* "N files in a format sluice does not decode (.webp 2, .bmp 1; JPEG and
 * PNG only)" into b: nothing when there were none. */
static void foreign_summary(const scan_t *sc, sl__sbuf_t *b)
{
    int64_t n = 0;
    for (int k = 0; k < NFOREIGN; k++)
        n += sc->foreign[k];
    if (!n)
        return;
    sl__sbuf_printf(b, "%lld file%s in a format sluice does not decode (",
                    (long long)n, n == 1 ? "" : "s");
    const char *sep = "";
    for (int k = 0; k < NFOREIGN; k++)
        if (sc->foreign[k]) {
            sl__sbuf_printf(b, "%s%s %lld", sep, foreign_ext[k],
                            (long long)sc->foreign[k]);
            sep = ", ";
        }
    sl__sbuf_printf(b, "; JPEG and PNG only)");
}

/* The files left out for their format, as one warning. */
static int note_foreign(scan_t *sc)
{
    char what[512];
    sl__sbuf_t b = {what, sizeof what, 0, 0};
    what[0] = 0;
    foreign_summary(sc, &b);
    if (!what[0])
        return 0;
    char *msg = NULL;
    if (asprintf(&msg, "%s left out, the first: %s/%s", what, sc->root,
                 sc->foreign_first) < 0)
        return SL_ENOMEM;
    return add_note(sc, 0, msg);
}

/* Counts a file left out for its format (foreign_ext index k); the one
 * named is the first by path, whatever order readdir gives. */
static int add_foreign(scan_t *sc, int k, const char *rel, const char *name)
{
    char *p = join(rel, name);
    if (!p)
        return SL_ENOMEM;
    if (!sc->foreign_first || strcmp(p, sc->foreign_first) < 0) {
        free(sc->foreign_first);
        sc->foreign_first = p;
    } else {
        free(p);
    }
    sc->foreign[k]++;
    return 0;
}

/* Sorted entries of folder rel: sub-folders into dirs, image files into
 * files (names only). Follows symlinks, as torchvision does. An entry named
 * like an image that is not a regular file (FIFO, device, socket) or cannot
 * be stat'ed (a dangling or looping link), or whose path is too long to
 * open, is noted as lost; any other entry that cannot be stat'ed (it could
 * be a folder) is a warning. Entries are stat'ed relative to the folder
 * (fstatat), so a sub-folder whose path is PATH_MAX or longer is still
 * seen as one, and noted when it cannot be opened. */
static int list_dir(scan_t *sc, const char *rel, strvec_t *dirs,
                    strvec_t *files)
{
    char *abs = rel ? join(sc->root, rel) : strdup(sc->root);
    if (!abs)
        return SL_ENOMEM;
    DIR *d = opendir(abs);
    if (!d) {
        int e = errno;
        size_t alen = strlen(abs);
        free(abs);
        if (!rel) /* the root itself */
            return sl__fail(
                sc->err, sc->errlen, e == ENOENT ? SL_ENOTFOUND : SL_EIO,
                "%s: cannot open folder: %s", sc->root, strerror(e));
        /* Out of descriptors or memory, EIO: the machine, not the data;
         * never "left out" (a whole class) under skip. */
        if (!sl__err_is_data(sl__errno_code(e, SL_EIO)))
            return sl__fail(sc->err, sc->errlen, SL_ESYSTEM,
                            "%s/%s: cannot open folder: %s", sc->root, rel,
                            strerror(e));
        if (e == ENAMETOOLONG) /* PATH_MAX: it cannot be opened by path */
            return note(sc, 1, rel,
                        "cannot open folder: %s (a path of %zu bytes; left "
                        "out)",
                        strerror(e), alen);
        return note(sc, 1, rel, "cannot open folder: %s (left out)",
                    strerror(e));
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        struct stat st;
        int ok = fstatat(dirfd(d), e->d_name, &st, 0) == 0, err = errno;
        int image = files && sl__folder_is_image_name(e->d_name);
        size_t plen = strlen(abs) + 1 + strlen(e->d_name);
        if (ok && S_ISDIR(st.st_mode)) {
            if (dirs)
                rc = strvec_push(dirs, strdup(e->d_name));
            continue;
        }
        int k =
            files && ok && S_ISREG(st.st_mode) ? foreign_index(e->d_name) : -1;
        if (k >= 0) {
            rc = add_foreign(sc, k, rel, e->d_name);
            continue;
        }
        if (image && ok && S_ISREG(st.st_mode) && plen < PATH_MAX) {
            rc = strvec_push(files, strdup(e->d_name));
            continue;
        }
        if (!image && ok) /* not a sample */
            continue;
        char *sub = rel ? join(rel, e->d_name) : strdup(e->d_name);
        if (!sub) {
            rc = SL_ENOMEM;
            break;
        }
        if (e->d_type == DT_DIR) /* a folder, by readdir: its samples */
            rc = note(sc, 1, sub, "cannot open folder: %s (left out)",
                      strerror(err));
        else if (!image)
            rc = note(sc, 0, sub,
                      "cannot stat: %s (not listed; a folder there is not "
                      "walked)",
                      strerror(err));
        else if (!ok)
            rc = note(sc, 1, sub, "cannot open: %s", strerror(err));
        else if (!S_ISREG(st.st_mode))
            rc = note(sc, 1, sub, "not a regular file (%s)",
                      sl__file_type_name((unsigned)st.st_mode));
        else
            rc = note(sc, 1, sub, "cannot open: %s (a path of %zu bytes)",
                      strerror(ENAMETOOLONG), plen);
        free(sub);
    }
    closedir(d);
    free(abs);
    if (dirs && dirs->n)
        qsort(dirs->v, dirs->n, sizeof(char *), cmp_str);
    if (files && files->n)
        qsort(files->v, files->n, sizeof(char *), cmp_str);
    return rc;
}

/* Marks folder rel seen; *again = 1 (and a warning noted) when it was seen
 * before under another path. */
static int visit(scan_t *sc, const char *rel, int *again)
{
    *again = 0;
    char *abs = rel ? join(sc->root, rel) : strdup(sc->root);
    if (!abs)
        return SL_ENOMEM;
    struct stat st;
    int ok = stat(abs, &st) == 0;
    free(abs);
    if (!ok) /* gone since it was listed: list_dir notes it */
        return 0;
    const char *first = NULL;
    int rc = seen_add(sc, st.st_dev, st.st_ino, rel ? rel : ".", &first);
    if (rc != 1)
        return rc;
    *again = 1;
    return note(sc, 0, rel,
                "folder already scanned as %s/%s (a symlink loop or a "
                "second link to it), not followed",
                sc->root, first);
}

/* Walks rel (relative to root) recursively: files of a folder first, then
 * its sub-folders, each sorted (os.walk order with sorted names). Each
 * folder is walked once (visit), which bounds the walk by the folders
 * that exist, whatever links point where. */
static int walk(scan_t *sc, const char *rel, int64_t label)
{
    strvec_t dirs = {0}, files = {0};
    int rc = list_dir(sc, rel, &dirs, &files);
    for (size_t i = 0; !rc && i < files.n; i++) {
        if (sl__array_reserve(&sc->labels, &sc->lcap, sc->paths.n + 1,
                              sizeof *sc->labels, 1024)) {
            rc = SL_ENOMEM;
            break;
        }
        sc->labels[sc->paths.n] = label;
        rc = strvec_push(&sc->paths, join(rel, files.v[i]));
    }
    for (size_t i = 0; !rc && i < dirs.n; i++) {
        char *sub = join(rel, dirs.v[i]);
        int again = 0;
        rc = sub ? visit(sc, sub, &again) : SL_ENOMEM;
        if (!rc && !again)
            rc = walk(sc, sub, label);
        free(sub);
    }
    strvec_free(&dirs);
    strvec_free(&files);
    return rc;
}

static void scan_free(scan_t *sc)
{
    strvec_free(&sc->paths);
    free(sc->labels);
    for (size_t i = 0; i < sc->nnotes; i++)
        free(sc->notes[i].msg);
    free(sc->notes);
    free(sc->foreign_first);
    for (size_t i = 0; i < sc->seencap; i++)
        free(sc->seen[i].rel);
    free(sc->seen);
}

/* Class folders with no image, as one warning: their labels stay (the
 * numbering is torchvision's class_to_idx), but torchvision's ImageFolder
 * refuses such a folder, so a user coming from it is told. */
static int note_empty_classes(scan_t *sc, const strvec_t *classes)
{
    uint8_t *has = calloc(classes->n ? classes->n : 1, 1);
    if (!has)
        return SL_ENOMEM;
    for (size_t i = 0; i < sc->paths.n; i++)
        has[sc->labels[i]] = 1;
    size_t n = 0, first = 0;
    for (size_t c = classes->n; c-- > 0;)
        if (!has[c])
            n++, first = c;
    free(has);
    if (!n)
        return 0;
    return note(sc, 0, classes->v[first],
                "%zu class folder%s with no image, the first this one (its "
                "label kept, as torchvision's class_to_idx numbers it; "
                "torchvision's ImageFolder refuses an empty class)",
                n, n == 1 ? "" : "s");
}

int sl__folder_scan(const char *root, int skip_bad, sl__folder_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    scan_t sc = {
        .root = root, .skip_bad = skip_bad, .err = err, .errlen = errlen};
    strvec_t classes = {0};
    int again = 0;
    int rc = list_dir(&sc, NULL, &classes, NULL);
    if (!rc && classes.n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no class folders (expected root/<class>/<image>)",
                      root);
    /* The root and every class folder are marked first: a link from one
     * class into another (or back up to the root) is not followed, so
     * images stay in the class whose folder holds them. */
    if (!rc)
        rc = visit(&sc, NULL, &again);
    uint8_t *dup = rc ? NULL : calloc(classes.n, 1);
    if (!rc && !dup)
        rc = SL_ENOMEM;
    for (size_t c = 0; !rc && c < classes.n; c++)
        rc = visit(&sc, classes.v[c], &again), dup[c] = (uint8_t)again;
    for (size_t c = 0; !rc && c < classes.n; c++)
        if (!dup[c])
            rc = walk(&sc, classes.v[c], (int64_t)c);
    free(dup);
    if (!rc && sc.paths.n == 0) {
        char what[512];
        sl__sbuf_t b = {what, sizeof what, 0, 0};
        what[0] = 0;
        foreign_summary(&sc, &b);
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no .jpg/.jpeg/.png files in any class folder%s%s",
                      root, what[0] ? "; " : "", what);
    }
    if (!rc)
        rc = note_foreign(&sc);
    if (!rc)
        rc = note_empty_classes(&sc, &classes);
    sl__folder_t *f = rc ? NULL : calloc(1, sizeof *f);
    if (!rc && (!f || !(f->root = strdup(root)))) {
        free(f);
        f = NULL;
        rc = SL_ENOMEM;
    }
    if (rc) {
        strvec_free(&classes);
        scan_free(&sc);
        if (rc == SL_ENOMEM)
            sl__fail(err, errlen, rc, "%s: out of memory", root);
        sl__msg_escape(err, errlen); /* it may name a file */
        return rc;
    }
    f->nclasses = (int)classes.n;
    f->classes = classes.v;
    f->n = (int64_t)sc.paths.n;
    f->paths = sc.paths.v;
    f->labels = sc.labels;
    f->notes = sc.notes;
    f->nnotes = (int)sc.nnotes;
    sc.paths = (strvec_t){0};
    sc.labels = NULL;
    sc.notes = NULL;
    sc.nnotes = 0;
    scan_free(&sc);
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
    for (int i = 0; i < f->nnotes; i++)
        free(f->notes[i].msg);
    free(f->notes);
    free(f->root);
    free(f);
}
