/* text/textsrc: documents of plain text, JSON Lines and text shards. */
#include "textsrc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/fdcache.h"
#include "base/utf8.h"
#include "data/pack_dir.h"
#include "data/shard.h"

enum { KIND_TEXT = 0, KIND_JSONL = 1, KIND_SHARD = 2 };

typedef struct tfile {
    char *path;
    int kind;
    int whole;     /* text: the file is one document */
    uint64_t size; /* text / JSON Lines: bytes when indexed */
    int64_t first; /* its first document */
    /* text / JSON Lines: the file indexed, so that another one renamed
     * over its path is not read as it (read_doc; ino 0: not known) */
    uint64_t dev, ino;
    sl__shard_t *shard;
} tfile_t;

/* 16 bytes a document: a 10 GB corpus of 500-byte lines indexes in 320
 * MB. The file is found from the document (files[].first); a length that
 * does not fit 32 bits is kept aside (big). */
typedef struct tdoc {
    uint64_t off;  /* byte offset; shards: the record index */
    uint32_t len;  /* bytes (BIG_LEN: in big); shards: the record's raw size */
    uint32_t line; /* 1-based; shards: 0 */
} tdoc_t;
#define BIG_LEN UINT32_MAX

typedef struct tbig {
    int64_t doc;
    uint64_t len;
} tbig_t;

struct sl__textsrc {
    tfile_t *files;
    int nfiles;
    size_t capfiles;
    tdoc_t *docs;
    int64_t ndocs;
    size_t capdocs;
    tbig_t *big; /* by document, ascending */
    size_t nbig, capbig;
    sl__fdcache_t fds; /* text / JSON Lines files, read a document a time */
    char **left_out;   /* under skip_bad: each shard left out, its message */
    int nleft_out;
    int skip_bad;
};

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int kind_of(const char *path)
{
    if (ends_with(path, ".sls"))
        return KIND_SHARD;
    if (ends_with(path, ".jsonl") || ends_with(path, ".json"))
        return KIND_JSONL;
    return KIND_TEXT;
}

static int push_doc(sl__textsrc_t *s, uint32_t line, uint64_t off, uint64_t len)
{
    if (sl__array_reserve(&s->docs, &s->capdocs, (size_t)s->ndocs + 1,
                          sizeof *s->docs, 1024))
        return SL_ENOMEM;
    if (len >= BIG_LEN) {
        if (sl__array_reserve(&s->big, &s->capbig, s->nbig + 1, sizeof *s->big,
                              16))
            return SL_ENOMEM;
        s->big[s->nbig++] = (tbig_t){s->ndocs, len};
    }
    s->docs[s->ndocs++] =
        (tdoc_t){off, len >= BIG_LEN ? BIG_LEN : (uint32_t)len, line};
    return 0;
}

/* The index pass reads a file in blocks of this. */
#define SCAN_BLOCK ((size_t)1 << 20)

/* The state of one line while a file is scanned in blocks. */
typedef struct lscan {
    uint64_t start; /* the line's first byte */
    uint32_t line;
    int blank;    /* only spaces, tabs and CRs so far */
    uint8_t last; /* its last byte so far */
} lscan_t;

/* The line that ends before byte `end` (its '\n', or the end of the
 * file) becomes a document, or not. */
static int end_line(sl__textsrc_t *s, int kind, lscan_t *ls, uint64_t end)
{
    uint64_t n = end - ls->start;
    /* CRLF: the line ends at "\r\n" (or a \r ends the file), so the
     * \r is no part of the document and a CRLF file gives its LF
     * twin's documents and chunks. A lone \r inside a line stays. */
    if (n && ls->last == '\r')
        n--;
    int keep = kind == KIND_JSONL ? !ls->blank : n > 0;
    if (keep && push_doc(s, ls->line, ls->start, n))
        return SL_ENOMEM;
    *ls = (lscan_t){end + 1, ls->line + 1, 1, 0};
    return 0;
}

/* Indexes the lines of text / JSON Lines file f in one pass of SCAN_BLOCK
 * reads: the file itself is read again a document at a time
 * (sl__textsrc_get), never held. */
static int index_lines(sl__textsrc_t *s, tfile_t *f, int fd, char *err,
                       size_t errlen)
{
    uint8_t *blk = malloc(SCAN_BLOCK);
    if (!blk)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", f->path);
    lscan_t ls = {0, 1, 1, 0};
    uint64_t at = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, blk, SCAN_BLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = sl__fail(err, errlen, sl__errno_code(e, SL_EIO),
                          "%s: read: %s", f->path, strerror(e));
            break;
        }
        if (r == 0)
            break;
        for (size_t k = 0; !rc && k < (size_t)r;) {
            const uint8_t *nl = memchr(blk + k, '\n', (size_t)r - k);
            size_t e = nl ? (size_t)(nl - blk) : (size_t)r;
            for (size_t j = k; ls.blank && j < e; j++) /* stops early */
                ls.blank = blk[j] == ' ' || blk[j] == '\t' || blk[j] == '\r';
            if (e > k)
                ls.last = blk[e - 1];
            if (nl)
                rc = end_line(s, f->kind, &ls, at + e);
            k = e + 1;
        }
        at += (uint64_t)r;
        if (rc)
            break;
    }
    if (!rc && ls.start < at) /* a last line without '\n' */
        rc = end_line(s, f->kind, &ls, at);
    if (rc == SL_ENOMEM)
        sl__fail(err, errlen, rc, "%s: out of memory", f->path);
    f->size = at;
    free(blk);
    return rc;
}

/* Indexes file f's documents. */
static int index_file(sl__textsrc_t *s, uint32_t fi, char *err, size_t errlen)
{
    tfile_t *f = &s->files[fi];
    f->first = s->ndocs;
    int rc;
    if (f->kind == KIND_SHARD) {
        /* A pack's shards come opened (add_pack). */
        rc = f->shard ? 0 : sl__shard_open(f->path, &f->shard, err, errlen);
        if (rc)
            return rc;
        uint64_t n = sl__shard_count(f->shard);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t raw = sl__shard_entry(f->shard, i)->raw_size;
            if (raw && push_doc(s, 0, i, raw))
                return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        }
        return 0;
    }
    int64_t size = 0;
    int fd = sl__open_regular(f->path, &size, err, errlen); /* no FIFO wait */
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) == 0)
        f->dev = (uint64_t)st.st_dev, f->ino = (uint64_t)st.st_ino;
    if (f->whole) { /* nothing to find in it: its size is the document's */
        f->size = (uint64_t)size;
        rc = size && push_doc(s, 1, 0, (uint64_t)size)
                 ? sl__fail(err, errlen, SL_ENOMEM, "out of memory")
                 : 0;
    } else {
        rc = index_lines(s, f, fd, err, errlen);
    }
    close(fd);
    return rc;
}

static int add_file(sl__textsrc_t *s, const char *path, int kind, int whole)
{
    if (sl__array_reserve(&s->files, &s->capfiles, (size_t)s->nfiles + 1,
                          sizeof *s->files, 16))
        return SL_ENOMEM;
    tfile_t *f = &s->files[s->nfiles];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path)
        return SL_ENOMEM;
    f->kind = kind;
    f->whole = whole && kind == KIND_TEXT;
    s->nfiles++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A pack folder: its shards in pack order, checked whole (data/pack_dir:
 * an unfinished or mixed pack is refused); under skip_bad a shard that
 * cannot be opened is left out and noted, as an image pack's is. */
static int add_pack(sl__textsrc_t *s, const char *dir, char *err, size_t errlen)
{
    sl__pack_dir_t p;
    int rc = sl__pack_dir_open(
        dir, s->skip_bad ? SL__PACK_SKIP_DAMAGED : SL__PACK_STRICT, &p, err,
        errlen);
    for (int i = 0; !rc && i < p.nbad; i++)
        if (sl__msg_list_add(&s->left_out, &s->nleft_out, p.bad[i],
                             " (whole shard left out)"))
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", dir);
    for (int k = 0; !rc && k < p.nshards; k++) {
        if (add_file(s, sl__shard_path(p.shards[k]), KIND_SHARD, 0)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", dir);
            break;
        }
        s->files[s->nfiles - 1].shard = p.shards[k];
        p.shards[k] = NULL;
    }
    sl__pack_dir_close(&p);
    return rc;
}

/* A directory: a pack if it holds shards, else its other regular files
 * (not hidden ones), sorted by name. */
static int add_dir(sl__textsrc_t *s, const char *dir, int whole, char *err,
                   size_t errlen)
{
    if (sl__pack_dir_holds(dir))
        return add_pack(s, dir, err, errlen);
    DIR *d = opendir(dir);
    if (!d)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot open: %s", dir,
                        strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (sl__array_reserve(&names, &cap, n + 1, sizeof *names, 64)) {
            rc = SL_ENOMEM;
            break;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = SL_ENOMEM;
            break;
        }
        sl__path_join_buf(p, len, dir, e->d_name);
        struct stat st;
        if (stat(p, &st) || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        names[n++] = p;
    }
    closedir(d);
    if (!rc && names)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (!rc && add_file(s, names[i], kind_of(names[i]), whole))
            rc = SL_ENOMEM;
        free(names[i]);
    }
    free(names);
    if (rc)
        return sl__fail(err, errlen, rc, "%s: out of memory", dir);
    return 0;
}

int sl__textsrc_open(const char *const *paths, int npaths, int doc_per_file,
                     int skip_bad, sl__textsrc_t **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (npaths < 1)
        return sl__fail(err, errlen, SL_EINVAL, "no text source given");
    sl__textsrc_t *s = calloc(1, sizeof *s);
    if (!s)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    sl__fdcache_init(&s->fds);
    s->skip_bad = skip_bad;
    int rc = 0;
    for (int i = 0; !rc && i < npaths; i++) {
        struct stat st;
        if (stat(paths[i], &st))
            rc = sl__fail(err, errlen, errno == ENOENT ? SL_ENOTFOUND : SL_EIO,
                          "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = add_dir(s, paths[i], doc_per_file, err, errlen);
        else if (add_file(s, paths[i], kind_of(paths[i]), doc_per_file))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    if (!rc && s->nfiles == 0 && s->nleft_out)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no readable documents: all %d shards left out; "
                      "the first: %s",
                      paths[0], s->nleft_out, s->left_out[0]);
    else if (!rc && s->nfiles == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no text files", paths[0]);
    for (int i = 0; !rc && i < s->nfiles; i++)
        rc = index_file(s, (uint32_t)i, err, errlen);
    if (!rc && s->ndocs) { /* the growth's slack: up to half the index */
        tdoc_t *d = realloc(s->docs, (size_t)s->ndocs * sizeof *d);
        if (d)
            s->docs = d, s->capdocs = (size_t)s->ndocs;
    }
    if (rc) {
        sl__textsrc_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sl__textsrc_close(sl__textsrc_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nfiles; i++) {
        free(s->files[i].path);
        sl__shard_close(s->files[i].shard);
    }
    free(s->files);
    free(s->docs);
    free(s->big);
    sl__fdcache_free(&s->fds);
    sl__strv_free(s->left_out, s->nleft_out);
    free(s);
}

int sl__textsrc_left_out_count(const sl__textsrc_t *s)
{
    return s->nleft_out;
}

const char *sl__textsrc_left_out(const sl__textsrc_t *s, int i)
{
    return i >= 0 && i < s->nleft_out ? s->left_out[i] : NULL;
}

int64_t sl__textsrc_count(const sl__textsrc_t *s)
{
    return s->ndocs;
}

uint64_t sl__textsrc_size(const sl__textsrc_t *s, int64_t i)
{
    if (s->docs[i].len != BIG_LEN)
        return s->docs[i].len;
    size_t lo = 0, hi = s->nbig; /* big is by document: the one of i */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->big[mid].doc <= i)
            lo = mid;
        else
            hi = mid;
    }
    return s->big[lo].len;
}

/* The file of document i: the last whose first document is <= i (a file
 * without documents shares its first with the next). */
static const tfile_t *file_of(const sl__textsrc_t *s, int64_t i)
{
    int lo = 0, hi = s->nfiles;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (s->files[mid].first <= i)
            lo = mid;
        else
            hi = mid;
    }
    return &s->files[lo];
}

const char *sl__textsrc_describe(const sl__textsrc_t *s, int64_t i, char *buf,
                                 size_t len)
{
    const tdoc_t *d = &s->docs[i];
    const tfile_t *f = file_of(s, i);
    if (f->kind == KIND_SHARD)
        snprintf(buf, len, "%s: record %llu", f->path,
                 (unsigned long long)d->off);
    else if (f->whole)
        snprintf(buf, len, "%s", f->path);
    else
        snprintf(buf, len, "%s:%u", f->path, d->line);
    return buf;
}

int sl__textsrc_parse_jsonl(const char *line, size_t n, const char *where,
                            sl__bytes_t *buf, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_loadb(line, n, JSON_ALLOW_NUL, &je);
    if (!j)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: invalid JSON: %s (column %d)", where, je.text,
                        je.column);
    int rc = 0;
    json_t *t = json_is_object(j) ? json_object_get(j, "text") : NULL;
    if (!json_is_object(j))
        rc = sl__fail(err, errlen, SL_ECORRUPT, "%s: not a JSON object", where);
    else if (!t)
        rc = sl__fail(err, errlen, SL_ECORRUPT, "%s: no \"text\" field", where);
    else if (!json_is_string(t))
        rc = sl__fail(err, errlen, SL_ECORRUPT, "%s: \"text\" is not a string",
                      where);
    else {
        size_t len = json_string_length(t);
        if (sl__bytes_reserve(buf, len + 1))
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", where);
        else {
            memcpy(buf->p, json_string_value(t), len);
            buf->n = len;
        }
    }
    json_decref(j);
    return rc;
}

/* Reads document d (len bytes) of text / JSON Lines file f into b, as
 * indexed: the file is read now, not at open, so a file truncated or
 * rewritten since is found here, named `where` (FILE:LINE) with the cause,
 * a bad document (SL_ECORRUPT). A line's next byte is read with it: it
 * must still end the line ('\n', or the '\r' of a CRLF). */
static int read_doc(const sl__textsrc_t *s, const tfile_t *f, const tdoc_t *d,
                    uint64_t len, const char *where, sl__bytes_t *b, char *err,
                    size_t errlen)
{
    size_t want = (size_t)len + (!f->whole && d->off + len < f->size);
    if (len > SIZE_MAX - 2 || sl__bytes_reserve(b, want + 1))
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", where);
    sl__fdcache_t *fds = (sl__fdcache_t *)&s->fds; /* locks its own */
    char why[1024];
    int fd =
        sl__fdcache_get(fds, (int)(f - s->files), f->path, why, sizeof why);
    if (fd < 0)
        return sl__fail(err, errlen, fd, "%s: reading it again: %s", where,
                        why);
    /* A file renamed over the path since (an editor's save, a rewritten
     * corpus) is another file: a descriptor opened now reads it, one the
     * cache held since reads the old one, so which bytes a document had
     * would depend on which descriptor its reader got. */
    struct stat st;
    int rc = 0;
    if (f->ino && fstat(fd, &st) == 0 &&
        ((uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino))
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: the file was replaced after the loader opened it "
                      "(another file is at its path: inode %llu now, %llu "
                      "then)",
                      where, (unsigned long long)st.st_ino,
                      (unsigned long long)f->ino);
    size_t got = 0;
    while (!rc && got < want) {
        ssize_t r = pread(fd, b->p + got, want - got, (off_t)(d->off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = sl__fail(err, errlen, sl__errno_code(e, SL_EIO),
                          "%s: read failed at byte %llu: %s", where,
                          (unsigned long long)(d->off + got), strerror(e));
        } else if (r == 0) {
            long long now = fstat(fd, &st) ? -1 : (long long)st.st_size;
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "%s: the file was truncated after the loader opened "
                          "it: %lld bytes now, %llu then (the document is "
                          "bytes %llu..%llu)",
                          where, now, (unsigned long long)f->size,
                          (unsigned long long)d->off,
                          (unsigned long long)(d->off + len));
        } else {
            got += (size_t)r;
        }
    }
    sl__fdcache_put(fds, fd);
    if (!rc && want > len && b->p[len] != '\n' && b->p[len] != '\r')
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: the file changed after the loader opened it: the "
                      "line no longer ends at byte %llu",
                      where, (unsigned long long)(d->off + len));
    b->n = (size_t)len;
    return rc;
}

int sl__textsrc_get(const sl__textsrc_t *s, int64_t i, sl__bytes_t *buf,
                    sl__bytes_t *scratch, const char **p, size_t *n, char *err,
                    size_t errlen)
{
    const tdoc_t *d = &s->docs[i];
    const tfile_t *f = file_of(s, i);
    char where[4200];
    if (f->kind == KIND_SHARD) {
        const sl__shard_entry_t *e = sl__shard_entry(f->shard, d->off);
        snprintf(where, sizeof where, "%s: record %llu (%s)", f->path,
                 (unsigned long long)d->off, e->name);
        int rc =
            sl__shard_read(f->shard, d->off, buf, scratch, NULL, err, errlen);
        if (rc)
            return rc; /* names the shard, record and cause */
        *p = (const char *)buf->p;
        *n = buf->n;
    } else {
        if (f->whole)
            snprintf(where, sizeof where, "%s", f->path);
        else
            snprintf(where, sizeof where, "%s:%u", f->path, d->line);
        uint64_t len = sl__textsrc_size(s, i);
        /* JSON Lines: the line in scratch, its text parsed into buf */
        sl__bytes_t *raw = f->kind == KIND_JSONL ? scratch : buf;
        int rc = read_doc(s, f, d, len, where, raw, err, errlen);
        if (!rc && f->kind == KIND_JSONL) {
            rc = sl__textsrc_parse_jsonl((const char *)raw->p, raw->n, where,
                                         buf, err, errlen);
            if (rc)
                return rc;
            *p = (const char *)buf->p;
            *n = buf->n;
            return 0; /* jansson accepts valid UTF-8 only */
        }
        if (rc)
            return rc;
        *p = (const char *)buf->p;
        *n = buf->n;
    }
    size_t bad = sl__utf8_valid_prefix((const uint8_t *)*p, *n);
    if (bad < *n)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: invalid UTF-8 at byte %zu (0x%02x)", where, bad,
                        ((const uint8_t *)*p)[bad]);
    return 0;
}
