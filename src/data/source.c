#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "folder.h"
#include "shard.h"
#include "shard_walk.h"

/* Records are addressed by a global index; shard k holds
 * [first[k], first[k+1]). */
struct sl__source {
    char *path;
    sl__folder_t *folder; /* ImageFolder source, or NULL */
    sl__shard_t **shards; /* shard source */
    int nshards;
    int64_t *first; /* nshards + 1 */
    int nclasses;
    char **classes;
    int nbad;
    char **bad;
};

/* classes.txt: one class name per line, line i names class i. */
static int read_classes(sl__source_t *s, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/classes.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* optional: names then default to the label number */
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (sl__array_reserve(&s->classes, &cap, (size_t)s->nclasses + 1,
                              sizeof *s->classes, 64)) {
            fclose(f);
            return SL_ENOMEM;
        }
        s->classes[s->nclasses] = strdup(line);
        if (!s->classes[s->nclasses]) {
            fclose(f);
            return SL_ENOMEM;
        }
        s->nclasses++;
    }
    fclose(f);
    return 0;
}

static int add_bad(sl__source_t *s, const char *msg)
{
    char **v = realloc(s->bad, (size_t)(s->nbad + 1) * sizeof *v);
    if (!v)
        return SL_ENOMEM;
    s->bad = v;
    s->bad[s->nbad] = strdup(msg);
    if (!s->bad[s->nbad])
        return SL_ENOMEM;
    s->nbad++;
    return 0;
}

static int open_shards(sl__source_t *s, char **paths, int n, int skip_bad,
                       char *err, size_t errlen)
{
    s->shards = calloc((size_t)n + 1, sizeof *s->shards);
    s->first = calloc((size_t)n + 1, sizeof *s->first);
    if (!s->shards || !s->first)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int64_t total = 0, maxlabel = -1;
    for (int i = 0; i < n; i++) {
        sl__shard_t *sh = NULL;
        char msg[1024];
        int rc = sl__shard_open(paths[i], &sh, msg, sizeof msg);
        if (rc) {
            if (!skip_bad)
                return sl__fail(err, errlen, rc, "%s", msg);
            if (add_bad(s, msg))
                return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            continue;
        }
        for (uint64_t k = 0; k < sl__shard_count(sh); k++) {
            int64_t lab = sl__shard_entry(sh, k)->label;
            if (lab > maxlabel)
                maxlabel = lab;
        }
        s->first[s->nshards] = total;
        s->shards[s->nshards++] = sh;
        total += (int64_t)sl__shard_count(sh);
    }
    s->first[s->nshards] = total;
    if (total == 0)
        return sl__fail(err, errlen, SL_ENOTFOUND, "%s: no readable records",
                        s->path);
    if (s->nclasses == 0 && maxlabel >= 0) {
        /* No classes.txt: name classes by number. */
        s->classes = calloc((size_t)maxlabel + 1, sizeof *s->classes);
        if (!s->classes)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        for (int64_t c = 0; c <= maxlabel; c++) {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)c);
            s->classes[c] = strdup(num);
        }
        s->nclasses = (int)maxlabel + 1;
    }
    return 0;
}

int sl__source_open(const char *path, int skip_bad, sl__source_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    sl__source_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: %s", path,
                      strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        char **paths = NULL;
        int n = 0;
        rc = sl__shard_list(path, &paths, &n);
        if (rc) {
            sl__fail(err, errlen, rc, "%s: cannot list folder", path);
        } else if (n > 0) {
            rc = read_classes(s, path);
            if (!rc)
                rc = open_shards(s, paths, n, skip_bad, err, errlen);
        } else {
            rc = sl__folder_scan(path, &s->folder, err, errlen);
            if (!rc) {
                s->nclasses = s->folder->nclasses;
                s->classes = s->folder->classes;
            }
        }
        sl__shard_list_free(paths, n);
    } else {
        char *one = s->path;
        rc = open_shards(s, &one, 1, 0, err, errlen);
    }
    if (rc) {
        sl__source_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sl__source_close(sl__source_t *s)
{
    if (!s)
        return;
    if (s->folder)
        sl__folder_free(s->folder); /* owns classes */
    else
        sl__strv_free(s->classes, s->nclasses);
    for (int i = 0; i < s->nshards; i++)
        sl__shard_close(s->shards[i]);
    sl__strv_free(s->bad, s->nbad);
    free(s->shards);
    free(s->first);
    free(s->path);
    free(s);
}

int64_t sl__source_count(const sl__source_t *s)
{
    return s->folder ? s->folder->n : s->first[s->nshards];
}

int sl__source_num_classes(const sl__source_t *s)
{
    return s->nclasses;
}

const char *sl__source_class_name(const sl__source_t *s, int c)
{
    return c >= 0 && c < s->nclasses ? s->classes[c] : NULL;
}

/* Shard holding global record i (binary search over first[]). */
static int find_shard(const sl__source_t *s, int64_t i, uint64_t *local)
{
    int lo = 0, hi = s->nshards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    *local = (uint64_t)(i - s->first[lo]);
    return lo;
}

int64_t sl__source_label(const sl__source_t *s, int64_t i)
{
    if (s->folder)
        return s->folder->labels[i];
    uint64_t k;
    int sh = find_shard(s, i, &k);
    return sl__shard_entry(s->shards[sh], k)->label;
}

const char *sl__source_describe(const sl__source_t *s, int64_t i, char *buf,
                                size_t len)
{
    if (s->folder) {
        snprintf(buf, len, "%s/%s", s->folder->root, s->folder->paths[i]);
    } else {
        uint64_t k;
        int sh = find_shard(s, i, &k);
        const sl__shard_entry_t *e = sl__shard_entry(s->shards[sh], k);
        snprintf(buf, len, "%s: record %llu (%s)",
                 sl__shard_path(s->shards[sh]), (unsigned long long)k,
                 e->name ? e->name : "");
    }
    return buf;
}

int64_t sl__source_file_count(const sl__source_t *s)
{
    return s->folder ? s->folder->n : s->nshards;
}

const char *sl__source_file_path(const sl__source_t *s, int64_t k, char *buf,
                                 size_t len)
{
    if (k < 0 || k >= sl__source_file_count(s))
        return NULL;
    int n = s->folder ? snprintf(buf, len, "%s/%s", s->folder->root,
                                 s->folder->paths[k])
                      : snprintf(buf, len, "%s", sl__shard_path(s->shards[k]));
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

static int read_file(const char *root, const char *rel, sl__bytes_t *out,
                     const sl__admit_t *admit, uint64_t *stored, char *err,
                     size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot open: %s", path,
                        strerror(errno));
    struct stat st;
    int rc = 0;
    char why[256];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: not a regular file", path);
    } else if ((rc = sl__admit(admit, (int64_t)st.st_size + 1, why,
                               sizeof why))) {
        sl__fail(err, errlen, rc, "%s: %s", path, why);
    } else if ((rc = sl__bytes_reserve(out, (size_t)st.st_size + 1))) {
        sl__fail(err, errlen, rc, "%s: out of memory (%lld bytes)", path,
                 (long long)st.st_size);
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = read(fd, out->p + got, (size_t)st.st_size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = sl__fail(err, errlen, SL_EIO, "%s: read failed: %s", path,
                              r < 0 ? strerror(errno) : "file shrank");
                break;
            }
            got += (size_t)r;
        }
        out->n = got;
        if (stored)
            *stored = got;
    }
    close(fd);
    return rc;
}

int sl__source_read(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                    sl__bytes_t *scratch, uint64_t *stored, char *err,
                    size_t errlen)
{
    return sl__source_read_admit(s, i, out, scratch, NULL, stored, err, errlen);
}

int sl__source_read_admit(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                          sl__bytes_t *scratch, const sl__admit_t *admit,
                          uint64_t *stored, char *err, size_t errlen)
{
    if (i < 0 || i >= sl__source_count(s))
        return sl__fail(err, errlen, SL_ERANGE, "%s: no sample %lld", s->path,
                        (long long)i);
    if (s->folder)
        return read_file(s->folder->root, s->folder->paths[i], out, admit,
                         stored, err, errlen);
    uint64_t k;
    int sh = find_shard(s, i, &k);
    return sl__shard_read_admit(s->shards[sh], k, out, scratch, admit, stored,
                                err, errlen);
}

int sl__source_bad_count(const sl__source_t *s)
{
    return s->nbad;
}

const char *sl__source_bad_message(const sl__source_t *s, int i)
{
    return i >= 0 && i < s->nbad ? s->bad[i] : NULL;
}
