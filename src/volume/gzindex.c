/* volume/gzindex: access points into a gzip file, recorded while it is
 * inflated, and readers that jump by them (gzindex.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "gzindex.h"

#define WIN 32768          /* deflate's window: the most a match reaches */
#define INBUF (128 << 10)  /* compressed bytes read at a time */
#define SCRATCH (64 << 10) /* where output passed over is inflated */

typedef struct point {
    int64_t in;  /* file offset of the first byte not wholly consumed */
    int64_t out; /* uncompressed offset */
    int bits;    /* bits of in[-1] not yet consumed (0..7) */
    unsigned dict;
    unsigned char *win; /* the dict bytes of output before out */
} point_t;

struct sl__gzindex {
    int64_t span;
    int64_t size; /* the file's, and its mtime, when built */
    struct timespec mtime;
    int n, cap;
    point_t *p;
};

struct sl__gzr {
    int fd;
    char name[1024];
    z_stream z;
    int raw;      /* inflating raw deflate (jumped in): no header, no check */
    int trailer;  /* bytes of a raw member's trailer still to pass */
    int between;  /* before a member (or the end) */
    int ended;    /* no more data */
    int64_t fpos; /* file offset just past the input buffer's bytes */
    int64_t out;  /* uncompressed offset of the next byte */
    int64_t last; /* out at the last point built */
    int64_t skip; /* bytes passed over, not yet inflated or jumped */
    int64_t made; /* bytes inflated (kept or not) */
    const sl__gzindex_t *use;
    sl__gzindex_t *build;
    unsigned char *in, *scratch;
};

/* Whether ix was built from the file as st describes it now. */
static int same_file(const sl__gzindex_t *ix, const struct stat *st)
{
    return ix->n && ix->size == (int64_t)st->st_size &&
           ix->mtime.tv_sec == st->st_mtim.tv_sec &&
           ix->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

int sl__gzindex_current(const sl__gzindex_t *ix, const char *path)
{
    struct stat st;
    return ix && !stat(path, &st) && same_file(ix, &st);
}

sl__gzindex_t *sl__gzindex_new(int64_t span)
{
    sl__gzindex_t *ix = calloc(1, sizeof *ix);
    if (ix)
        ix->span = span > 0 ? span : SL__GZ_SPAN;
    return ix;
}

int64_t sl__gzindex_bytes(const sl__gzindex_t *ix)
{
    if (!ix)
        return 0;
    int64_t b = (int64_t)sizeof *ix + (int64_t)ix->cap * (int64_t)sizeof *ix->p;
    for (int i = 0; i < ix->n; i++)
        b += ix->p[i].dict;
    return b;
}

int sl__gzindex_points(const sl__gzindex_t *ix)
{
    return ix ? ix->n : 0;
}

void sl__gzindex_free(sl__gzindex_t *ix)
{
    if (!ix)
        return;
    for (int i = 0; i < ix->n; i++)
        free(ix->p[i].win);
    free(ix->p);
    free(ix);
}

static int fail_zlib(sl__gzr_t *r, int ret, int *code, char *err, size_t errlen)
{
    if (ret == Z_MEM_ERROR) {
        *code = SL_ENOMEM;
        return sl__fail(err, errlen, *code, "%s: out of memory", r->name);
    }
    *code = SL_ECORRUPT;
    return sl__fail(err, errlen, *code, "%s: damaged gzip data (%s)", r->name,
                    r->z.msg ? r->z.msg : "bad stream");
}

/* At least `need` bytes of input in the buffer, unless the file ends
 * first. @return 0, or -1 with *code (a read error). */
static int fill(sl__gzr_t *r, unsigned need, int *code, char *err,
                size_t errlen)
{
    while (r->z.avail_in < need) {
        memmove(r->in, r->z.next_in, r->z.avail_in);
        r->z.next_in = r->in;
        ssize_t k = pread(r->fd, r->in + r->z.avail_in, INBUF - r->z.avail_in,
                          (off_t)r->fpos);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            *code = sl__errno_code(e, SL_EIO);
            sl__fail(err, errlen, *code, "%s: read failed: %s", r->name,
                     strerror(e));
            return -1;
        }
        if (k == 0)
            return 0;
        r->z.avail_in += (unsigned)k;
        r->fpos += k;
    }
    return 0;
}

/* A point where inflate stands now (at a block boundary). */
static int add_point(sl__gzr_t *r)
{
    sl__gzindex_t *ix = r->build;
    if (ix->n == ix->cap) {
        int cap = ix->cap ? 2 * ix->cap : 16;
        point_t *p = realloc(ix->p, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        ix->p = p;
        ix->cap = cap;
    }
    point_t *p = &ix->p[ix->n];
    if (!(p->win = malloc(WIN)))
        return -1;
    p->dict = WIN;
    if (inflateGetDictionary(&r->z, p->win, &p->dict) != Z_OK) {
        free(p->win);
        return -1;
    }
    p->in = r->fpos - r->z.avail_in;
    p->out = r->out;
    p->bits = r->z.data_type & 7;
    r->last = r->out;
    ix->n++;
    return 0;
}

/* Before a member: another one starts (gzip's magic), or the data ends
 * (end of file, or bytes that are not a member: ignored, as gzread
 * does). */
static int next_member(sl__gzr_t *r, int *code, char *err, size_t errlen)
{
    if (fill(r, 2, code, err, errlen))
        return -1;
    if (r->z.avail_in < 2 || r->z.next_in[0] != 0x1f ||
        r->z.next_in[1] != 0x8b) {
        r->ended = 1;
        return 0;
    }
    int ret = inflateReset2(&r->z, 15 + 16);
    if (ret != Z_OK)
        return fail_zlib(r, ret, code, err, errlen);
    r->raw = 0;
    r->between = 0;
    return 0;
}

/* Inflates up to n bytes into dst (NULL: into scratch, dropped).
 * @return the bytes, or -1 with *code. */
static int64_t pump(sl__gzr_t *r, unsigned char *dst, size_t n, int *code,
                    char *err, size_t errlen)
{
    size_t got = 0;
    while (got < n && !r->ended) {
        if (r->between) {
            if (next_member(r, code, err, errlen))
                return -1;
            continue;
        }
        if (fill(r, 1, code, err, errlen))
            return -1;
        if (r->z.avail_in == 0) {
            *code = SL_ECORRUPT;
            sl__fail(err, errlen, *code,
                     "%s: truncated gzip file (the stream ends inside a "
                     "member, after %lld uncompressed bytes)",
                     r->name, (long long)r->out);
            return -1;
        }
        if (r->trailer) { /* a raw member's CRC-32 and length: passed */
            unsigned k = r->z.avail_in < (unsigned)r->trailer
                             ? r->z.avail_in
                             : (unsigned)r->trailer;
            r->z.next_in += k;
            r->z.avail_in -= k;
            r->between = !(r->trailer -= (int)k);
            continue;
        }
        size_t want = n - got;
        if (!dst && want > SCRATCH)
            want = SCRATCH;
        if (want > UINT32_MAX)
            want = UINT32_MAX;
        r->z.next_out = dst ? dst + got : r->scratch;
        r->z.avail_out = (unsigned)want;
        unsigned had = r->z.avail_in;
        int ret = inflate(&r->z, r->build ? Z_BLOCK : Z_NO_FLUSH);
        size_t made = want - r->z.avail_out;
        if (ret == Z_BUF_ERROR && !made && had == r->z.avail_in)
            ret = Z_DATA_ERROR; /* input and room, and no progress */
        got += made;
        r->out += (int64_t)made;
        r->made += (int64_t)made;
        if (ret == Z_NEED_DICT)
            ret = Z_DATA_ERROR;
        if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
            fail_zlib(r, ret, code, err, errlen);
            return -1;
        }
        if (ret == Z_STREAM_END) {
            if (r->raw)
                r->trailer = 8;
            else
                r->between = 1;
            continue;
        }
        /* At a block's end (not the member's last block: its trailer
         * follows, not deflate data), a point when span bytes have come
         * since the last one. */
        if (r->build && (r->z.data_type & 128) && !(r->z.data_type & 64) &&
            (r->build->n == 0 || r->out - r->last >= r->build->span) &&
            add_point(r)) {
            *code = SL_ENOMEM;
            sl__fail(err, errlen, *code, "%s: out of memory", r->name);
            return -1;
        }
    }
    return (int64_t)got;
}

/* Passing over to `to`: restarts at the use index's last point at or
 * before it, when that is ahead. */
static int jump(sl__gzr_t *r, int64_t to, int *code, char *err, size_t errlen)
{
    const sl__gzindex_t *ix = r->use;
    int lo = 0, hi = ix->n; /* the first point past `to` */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ix->p[mid].out <= to)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || ix->p[lo - 1].out <= r->out)
        return 0;
    const point_t *p = &ix->p[lo - 1];
    int ret = inflateReset2(&r->z, -15);
    r->z.avail_in = 0;
    r->fpos = p->in - (p->bits ? 1 : 0);
    if (ret == Z_OK && p->bits) {
        if (fill(r, 1, code, err, errlen))
            return -1;
        if (r->z.avail_in < 1) {
            *code = SL_ECORRUPT;
            return sl__fail(err, errlen, *code,
                            "%s: truncated gzip file (shorter than its index)",
                            r->name);
        }
        int c = *r->z.next_in++;
        r->z.avail_in--;
        ret = inflatePrime(&r->z, p->bits, c >> (8 - p->bits));
    }
    if (ret == Z_OK)
        ret = inflateSetDictionary(&r->z, p->win, p->dict);
    if (ret != Z_OK)
        return fail_zlib(r, ret, code, err, errlen);
    r->raw = 1;
    r->trailer = r->between = r->ended = 0;
    r->out = p->out;
    return 0;
}

int64_t sl__gzr_read(sl__gzr_t *r, void *dst, size_t n, int *code, char *err,
                     size_t errlen)
{
    /* Passing over is lazy: a volume's slab passes over the slices
     * before it one at a time, and only their sum spans access points. */
    if (!dst) {
        r->skip += (int64_t)n;
        return (int64_t)n;
    }
    if (r->skip) {
        int64_t to = r->out + r->skip;
        r->skip = 0;
        if (r->use && jump(r, to, code, err, errlen))
            return -1;
        int64_t left = to - r->out,
                got = pump(r, NULL, (size_t)left, code, err, errlen);
        if (got < left) /* -1, or the data ended inside */
            return got < 0 ? -1 : 0;
    }
    return pump(r, dst, n, code, err, errlen);
}

int64_t sl__gzr_inflated(const sl__gzr_t *r)
{
    return r->made;
}

void sl__gzr_close(sl__gzr_t *r)
{
    if (!r)
        return;
    inflateEnd(&r->z);
    if (r->fd >= 0)
        close(r->fd);
    free(r->in);
    free(r->scratch);
    free(r);
}

int sl__gzr_open(int fd, const char *name, const sl__gzindex_t *use,
                 sl__gzindex_t *build, sl__gzr_t **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    sl__gzr_t *r = calloc(1, sizeof *r);
    if (!r)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->fd = dup(fd);
    r->in = malloc(INBUF);
    r->scratch = malloc(SCRATCH);
    struct stat st;
    int code = 0;
    if (r->fd < 0 || fstat(r->fd, &st))
        code = sl__fail(err, errlen, sl__errno_code(errno, SL_EIO), "%s: %s",
                        name, strerror(errno));
    else if (!r->in || !r->scratch || inflateInit2(&r->z, 15 + 16) != Z_OK)
        code = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    if (code) { /* inflateEnd refuses a stream never initialised */
        sl__gzr_close(r);
        return code;
    }
    r->between = 1;
    r->z.next_in = r->in;
    r->build = build;
    if (build) {
        build->size = (int64_t)st.st_size;
        build->mtime = st.st_mtim;
    }
    /* an index of this file as it is now, or none */
    if (use && !build && same_file(use, &st))
        r->use = use;
    *out = r;
    return 0;
}
