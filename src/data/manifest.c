/* data/manifest: sluice-manifest.txt and classes.txt of a pack folder (see
 * manifest.h). The manifest is a few lines of text:
 *
 *   sluice-pack 1
 *   shards 2
 *   records 22
 *   classes 3 9f2c0b0e6a1d4c77        (or: classes none)
 *   shard shard-00000.sls 1047812 11 0a1b2c3d4e5f6071
 *   shard shard-00001.sls 803211 11 8899aabbccddeeff
 *   end
 *
 * Parsing is strict: every line in this order, single spaces, numbers in
 * decimal (checksums: 16 hex digits), nothing after "end". */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/alloc.h"
#include "base/base.h"

/* ---- reading a small file whole */

/* Reads DIR/NAME (at most max bytes) into a malloc'd buffer with a NUL
 * after it, by base/file's rule (sl__read_small_file: regular files only,
 * so a FIFO is refused, not waited on; the cap; the path named).
 * @return 0, SL_ENOTFOUND (nothing in err: no such file is no fault), or
 * an error. */
static int slurp(const char *dir, const char *name, size_t max, char **out,
                 size_t *n, char *err, size_t errlen)
{
    char path[4096];
    if (sl__path_join_buf(path, sizeof path, dir, name) >= (int)sizeof path)
        return sl__fail(err, errlen, SL_EINVAL, "%s: path too long", dir);
    int rc = sl__read_small_file(path, max, out, n, err, errlen);
    if (rc == SL_ENOTFOUND && err && errlen)
        err[0] = 0;
    return rc;
}

/* ---- classes.txt */

int sl__classes_parse(const char *text, size_t len, const char *what,
                      char ***names, int *n, char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    char **v = NULL;
    size_t cap = 0;
    int cnt = 0;
    size_t off = 0;
    while (off < len) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len, k = end - off;
        if (k && text[off + k - 1] == '\r')
            k--;
        if (k > SL__CLASS_NAME_MAX) {
            sl__strv_free(v, cnt);
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: line %d: a class name of %zu bytes (at most "
                            "%d)",
                            what, cnt + 1, k, SL__CLASS_NAME_MAX);
        }
        if (cnt == INT32_MAX ||
            sl__array_reserve(&v, &cap, (size_t)cnt + 1, sizeof *v, 64) ||
            !(v[cnt] = malloc(k + 1))) {
            sl__strv_free(v, cnt);
            return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", what);
        }
        memcpy(v[cnt], text + off, k);
        v[cnt++][k] = 0;
        off = end + 1;
    }
    *names = v;
    *n = cnt;
    return 0;
}

int sl__classes_read(const char *dir, char ***names, int *n, uint64_t *sum,
                     char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    char *text;
    size_t len;
    int rc = slurp(dir, "classes.txt", SL__CLASSES_MAX_BYTES, &text, &len, err,
                   errlen);
    if (rc)
        return rc;
    if (sum)
        *sum = XXH3_64bits(text, len);
    char what[4096];
    snprintf(what, sizeof what, "%s/classes.txt", dir);
    rc = sl__classes_parse(text, len, what, names, n, err, errlen);
    free(text);
    return rc;
}

/* ---- the manifest */

void sl__manifest_free(sl__manifest_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nshards; i++)
        free(m->shards[i].name);
    free(m->shards);
    memset(m, 0, sizeof *m);
}

/* A line's words, split at single spaces (at most max; *nw of them). */
typedef struct word {
    const char *p;
    size_t n;
} word_t;

static int split(const char *p, size_t n, word_t *w, int max)
{
    int nw = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != ' ')
            continue;
        if (nw == max || i == start)
            return -1; /* too many words, or an empty one */
        w[nw++] = (word_t){p + start, i - start};
        start = i + 1;
    }
    return nw;
}

static int is(const word_t *w, const char *s)
{
    return w->n == strlen(s) && !memcmp(w->p, s, w->n);
}

/* Decimal u64, digits only, no overflow. */
static int dec(const word_t *w, uint64_t *v)
{
    if (w->n == 0 || w->n > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < w->n; i++) {
        unsigned d = (unsigned char)w->p[i] - '0';
        if (d > 9 || x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* Exactly 16 hex digits. */
static int hex(const word_t *w, uint64_t *v)
{
    if (w->n != 16)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < 16; i++) {
        char c = w->p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16;
        if (d > 15)
            return -1;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

/* A shard's file name: [A-Za-z0-9._-], not starting with a dot, ending
 * in ".sls", at most 255 bytes (so it names a file in the folder). */
static int name_ok(const word_t *w)
{
    if (w->n < 5 || w->n > 255 || w->p[0] == '.' ||
        memcmp(w->p + w->n - 4, ".sls", 4))
        return 0;
    for (size_t i = 0; i < w->n; i++) {
        char c = w->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* 0 when no two shards share a name. */
static int names_unique(const sl__manifest_t *m, const char **dup)
{
    char **v = malloc((size_t)(m->nshards ? m->nshards : 1) * sizeof *v);
    if (!v)
        return SL_ENOMEM;
    for (int i = 0; i < m->nshards; i++)
        v[i] = m->shards[i].name;
    qsort(v, (size_t)m->nshards, sizeof *v, cmp_name);
    int rc = 0;
    for (int i = 1; i < m->nshards && !rc; i++)
        if (!strcmp(v[i - 1], v[i])) {
            *dup = v[i];
            rc = SL_ECORRUPT;
        }
    free(v);
    return rc;
}

int sl__manifest_parse(const char *text, size_t n, const char *what,
                       sl__manifest_t *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    size_t off = 0, cap = 0;
    uint64_t nshards = 0, total = 0;
    int line = 0, stage = 0; /* 0 magic, 1 shards, 2 records, 3 classes,
                                4 shard lines, 5 after "end" */
    const char *why = NULL;
    while (off < n && !why) {
        const char *nl = memchr(text + off, '\n', n - off);
        line++;
        if (!nl) {
            why = "no newline at the end (cut short?)";
            break;
        }
        const char *lp = text + off;
        size_t len = (size_t)(nl - lp);
        word_t w[6];
        int nw = split(lp, len, w, 6);
        off += len + 1;
        uint64_t v;
        if (stage == 0) {
            if (len != strlen(SL__MANIFEST_MAGIC) ||
                memcmp(lp, SL__MANIFEST_MAGIC, len))
                why = "not a sluice pack manifest (first line is not "
                      "\"" SL__MANIFEST_MAGIC "\")";
            stage = 1;
        } else if (stage == 1) {
            if (nw != 2 || !is(&w[0], "shards") || dec(&w[1], &nshards) ||
                nshards > SL__MANIFEST_MAX_SHARDS)
                why = "expected \"shards N\"";
            stage = 2;
        } else if (stage == 2) {
            if (nw != 2 || !is(&w[0], "records") || dec(&w[1], &m->records))
                why = "expected \"records N\"";
            stage = 3;
        } else if (stage == 3) {
            m->classes = -1;
            if (nw == 2 && is(&w[0], "classes") && is(&w[1], "none"))
                ;
            else if (nw == 3 && is(&w[0], "classes") && !dec(&w[1], &v) &&
                     v <= INT32_MAX && !hex(&w[2], &m->classes_sum))
                m->classes = (int64_t)v;
            else
                why = "expected \"classes N CHECKSUM\" or \"classes none\"";
            stage = 4;
        } else if (stage == 4 && nw == 1 && is(&w[0], "end")) {
            if ((uint64_t)m->nshards != nshards)
                why = "fewer shard lines than \"shards\" says";
            else if (total != m->records)
                why = "the shards' records do not add up to \"records\"";
            stage = 5;
        } else if (stage == 4) {
            sl__manifest_shard_t s = {0};
            if (nw != 5 || !is(&w[0], "shard") || !name_ok(&w[1]) ||
                dec(&w[2], &s.bytes) || dec(&w[3], &s.records) ||
                hex(&w[4], &s.digest)) {
                why = "expected \"shard NAME.sls BYTES RECORDS CHECKSUM\"";
            } else if ((uint64_t)m->nshards == nshards) {
                why = "more shard lines than \"shards\" says";
            } else if (s.records > UINT64_MAX - total) {
                why = "record counts overflow";
            } else {
                if (sl__array_reserve(&m->shards, &cap, (size_t)m->nshards + 1,
                                      sizeof *m->shards, 64) ||
                    !(s.name = strndup(w[1].p, w[1].n))) {
                    sl__manifest_free(m);
                    return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory",
                                    what);
                }
                total += s.records;
                m->shards[m->nshards++] = s;
            }
        } else {
            why = "text after \"end\"";
        }
    }
    if (!why && stage != 5) {
        why = "no \"end\" line (cut short?)";
        line++; /* where it should have been */
    }
    const char *dup = NULL;
    int rc = why ? SL_ECORRUPT : names_unique(m, &dup);
    if (rc == SL_ENOMEM)
        sl__fail(err, errlen, rc, "%s: out of memory", what);
    else if (rc && dup)
        sl__fail(err, errlen, rc, "%s: shard %s listed twice", what, dup);
    else if (rc)
        sl__fail(err, errlen, rc, "%s: line %d: %s", what, line, why);
    if (rc)
        sl__manifest_free(m);
    return rc;
}

int sl__manifest_format(const sl__manifest_t *m, char **text, size_t *n)
{
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    if (!f)
        return SL_ENOMEM;
    fprintf(f, "%s\nshards %d\nrecords %" PRIu64 "\n", SL__MANIFEST_MAGIC,
            m->nshards, m->records);
    if (m->classes < 0)
        fprintf(f, "classes none\n");
    else
        fprintf(f, "classes %" PRId64 " %016" PRIx64 "\n", m->classes,
                m->classes_sum);
    for (int i = 0; i < m->nshards; i++)
        fprintf(f, "shard %s %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n",
                m->shards[i].name, m->shards[i].bytes, m->shards[i].records,
                m->shards[i].digest);
    fprintf(f, "end\n");
    int bad = ferror(f);
    if (fclose(f) || bad) {
        free(p);
        return SL_ENOMEM;
    }
    *text = p;
    *n = len;
    return 0;
}

int sl__manifest_read(const char *dir, sl__manifest_t *m, char *err,
                      size_t errlen)
{
    memset(m, 0, sizeof *m);
    char *text;
    size_t n;
    int rc = slurp(dir, SL__MANIFEST_NAME, SL__MANIFEST_MAX_BYTES, &text, &n,
                   err, errlen);
    if (rc)
        return rc;
    char what[4096];
    sl__path_join_buf(what, sizeof what, dir, SL__MANIFEST_NAME);
    rc = sl__manifest_parse(text, n, what, m, err, errlen);
    free(text);
    return rc;
}

int sl__manifest_write(const char *dir, const sl__manifest_t *m, char *err,
                       size_t errlen)
{
    char path[4096], tmp[4096];
    sl__path_join_buf(path, sizeof path, dir, SL__MANIFEST_NAME);
    if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, SL__MANIFEST_NAME,
                 (long)getpid()) >= (int)sizeof tmp)
        return sl__fail(err, errlen, SL_EINVAL, "%s: path too long", dir);
    char *text;
    size_t n;
    if (sl__manifest_format(m, &text, &n))
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", tmp,
                      strerror(errno));
    } else {
        size_t done = 0;
        while (done < n) {
            ssize_t w = write(fd, text + done, n - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        int ok = done == n && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok || rename(tmp, path)) {
            rc = sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", path,
                          strerror(errno));
            unlink(tmp);
        }
    }
    free(text);
    return rc;
}
