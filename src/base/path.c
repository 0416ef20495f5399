/* base/path: joining paths and creating folders (see base.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"

int sl__path_join_buf(char *buf, size_t cap, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    const char *sep = n == 0 || dir[n - 1] == '/' ? "" : "/"; /* "", "/" */
    return snprintf(buf, cap, "%.*s%s%s", (int)n, dir, sep, name);
}

char *sl__path_join(const char *dir, const char *name)
{
    int n = sl__path_join_buf(NULL, 0, dir, name);
    char *out = n < 0 ? NULL : malloc((size_t)n + 1);
    if (out)
        sl__path_join_buf(out, (size_t)n + 1, dir, name);
    return out;
}

/* After a mkdir of path failed with e: 0 where a folder is already there,
 * else -1 with errno (ENOTDIR where something else is). */
static int already_a_folder(const char *path, int e)
{
    struct stat st;
    if (e == EEXIST && stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        e = ENOTDIR;
    }
    errno = e;
    return -1;
}

/* mkdir of path, where a folder already there counts as made. */
static int make_one(const char *path)
{
    if (mkdir(path, 0777) == 0)
        return 0;
    return already_a_folder(path, errno);
}

/* Creates the folders above path up to `end` bytes of it. */
static int make_upto(const char *path, size_t end)
{
    char *p = strndup(path, end);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    int rc = 0;
    for (char *s = p + 1; !rc && *s; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = 0;
        rc = make_one(p);
        *s = '/';
    }
    if (!rc)
        rc = make_one(p);
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

int sl__mkdir_parents(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || (n == 1 && path[0] == '/'))
        return 0; /* in the current folder, or in / */
    return make_upto(path, n);
}

int sl__mkdir_made(const char *path, unsigned mode)
{
    if (mkdir(path, (mode_t)mode) == 0)
        return 1;
    if (errno == ENOENT) { /* a folder above is missing */
        if (sl__mkdir_parents(path))
            return -1;
        if (mkdir(path, (mode_t)mode) == 0)
            return 1;
    }
    return already_a_folder(path, errno);
}

int sl__mkdir_p(const char *path)
{
    return sl__mkdir_made(path, 0777) < 0 ? -1 : 0;
}
