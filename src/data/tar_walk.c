#include "tar_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define BLOCK 512
#define WINDOW (64 * 1024) /* headers are read through this read-ahead */

/* Header fields (POSIX ustar; GNU puts other things after `magic`). */
enum {
    H_NAME = 0,
    H_SIZE = 124,
    H_CHKSUM = 148,
    H_TYPE = 156,
    H_MAGIC = 257,
    H_PREFIX = 345
};

typedef struct walk {
    const sl__bytesrc_t *src;
    uint64_t size;
    uint8_t *win;
    uint64_t win_at;
    size_t win_n;
    char *name;     /* the member's full name being assembled */
    char *longname; /* from an 'L' or pax "path", for the next member */
    int have_long;
    int have_size; /* pax "size" for the next member */
    uint64_t pax_size;
} walk_t;

/* A pointer to len (<= WINDOW) bytes at off, through the read-ahead. */
static const uint8_t *at(walk_t *w, uint64_t off, size_t len, char *err,
                         size_t errlen, int *rc)
{
    if (off >= w->win_at && off + len <= w->win_at + w->win_n)
        return w->win + (off - w->win_at);
    if (off > w->size || len > w->size - off) {
        *rc = SL_ECORRUPT;
        return NULL;
    }
    uint64_t n = w->size - off < WINDOW ? w->size - off : WINDOW;
    if ((*rc = sl__bytesrc_read(w->src, off, w->win, (size_t)n, err, errlen)))
        return NULL;
    w->win_at = off;
    w->win_n = (size_t)n;
    return w->win;
}

/* A numeric field: octal (spaces / NULs around), or GNU base-256 when the
 * top bit of the first byte is set. -1 when malformed or negative. */
static int num(const uint8_t *p, size_t len, uint64_t *v)
{
    *v = 0;
    if (p[0] & 0x80) {
        if (p[0] != 0x80)
            return -1; /* 0xff: negative */
        for (size_t k = 1; k < len; k++) {
            if (*v >> 56)
                return -1;
            *v = *v << 8 | p[k];
        }
        return 0;
    }
    size_t k = 0;
    while (k < len && (p[k] == ' ' || p[k] == 0))
        k++;
    for (; k < len && p[k] >= '0' && p[k] <= '7'; k++) {
        if (*v >> 60)
            return -1;
        *v = *v << 3 | (uint64_t)(p[k] - '0');
    }
    for (; k < len; k++)
        if (p[k] != ' ' && p[k] != 0)
            return -1;
    return 0;
}

static int all_zero(const uint8_t *h)
{
    for (int k = 0; k < BLOCK; k++)
        if (h[k])
            return 0;
    return 1;
}

/* The stored checksum equals the sum of the header's bytes with the
 * checksum field read as spaces (unsigned, or signed as some old tars). */
static int checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (num(h + H_CHKSUM, 8, &want))
        return 0;
    uint32_t u = 0;
    int32_t s = 0;
    for (int k = 0; k < BLOCK; k++) {
        uint8_t c = k >= H_CHKSUM && k < H_CHKSUM + 8 ? ' ' : h[k];
        u += c;
        s += (int8_t)c;
    }
    return want == u || (int64_t)want == s;
}

int sl__tar_member_at(const uint8_t *h, uint64_t size)
{
    uint64_t v;
    char type = (char)h[H_TYPE];
    return checksum_ok(h) && !num(h + H_SIZE, 12, &v) && v == size &&
           (type == '0' || type == 0 || type == '7');
}

/* A NUL-terminated copy of a fixed field (not terminated when full). */
static size_t field(char *dst, const uint8_t *p, size_t len)
{
    size_t n = 0;
    while (n < len && p[n])
        n++;
    memcpy(dst, p, n);
    dst[n] = 0;
    return n;
}

/* pax records "LEN KEY=VALUE\n": path and size for the next member. */
static int pax(walk_t *w, const char *p, size_t n)
{
    size_t k = 0;
    while (k < n) {
        size_t len = 0, j = k;
        while (j < n && p[j] >= '0' && p[j] <= '9' && len < SL__TAR_PAX_MAX)
            len = len * 10 + (size_t)(p[j++] - '0');
        if (j == k || j >= n || p[j] != ' ' || len <= j - k + 1 ||
            len > n - k || p[k + len - 1] != '\n')
            return -1;
        const char *kv = p + j + 1, *end = p + k + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return -1;
        size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && !memcmp(kv, "path", 4)) {
            if (vlen > SL__TAR_NAME_MAX || memchr(eq + 1, 0, vlen))
                return -1;
            memcpy(w->longname, eq + 1, vlen);
            w->longname[vlen] = 0;
            w->have_long = 1;
        } else if (klen == 4 && !memcmp(kv, "size", 4)) {
            uint64_t v = 0;
            if (!vlen || vlen > 19)
                return -1;
            for (size_t i = 0; i < vlen; i++) {
                char c = eq[1 + i];
                if (c < '0' || c > '9')
                    return -1;
                v = v * 10 + (uint64_t)(c - '0');
            }
            w->pax_size = v;
            w->have_size = 1;
        }
        k += len;
    }
    return 0;
}

/* Reads an extension header's data (an 'L' name or pax records) of size
 * bytes at off into a fresh buffer, NUL-terminated. */
static char *ext_data(walk_t *w, uint64_t off, uint64_t size, char *err,
                      size_t errlen, int *rc)
{
    char *p = malloc((size_t)size + 1);
    if (!p) {
        *rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        return NULL;
    }
    if ((*rc = sl__bytesrc_read(w->src, off, p, (size_t)size, err, errlen))) {
        free(p);
        return NULL;
    }
    p[size] = 0;
    return p;
}

static int bad(const walk_t *w, uint64_t off, sl__tar_stop_t *stop, char *err,
               size_t errlen, const char *why)
{
    if (stop) { /* a checksummed long name stands whatever follows */
        stop->at = off;
        snprintf(stop->name, sizeof stop->name, "%s",
                 w->have_long ? w->longname : "");
    }
    return sl__fail(err, errlen, SL_ECORRUPT,
                    "%s: tar header at offset %llu: %s",
                    sl__bytesrc_name(w->src), (unsigned long long)off, why);
}

/* A regular member's full name (header h) into w->name: the long name
 * before it, or ustar's prefix and name. */
static void member_name(walk_t *w, const uint8_t *h)
{
    if (w->have_long) {
        snprintf(w->name, SL__TAR_NAME_MAX + 1, "%s", w->longname);
        return;
    }
    char prefix[156], name[101];
    field(name, h + H_NAME, 100);
    size_t np = 0;
    if (!memcmp(h + H_MAGIC, "ustar\0", 6))
        np = field(prefix, h + H_PREFIX, 155);
    if (np)
        snprintf(w->name, SL__TAR_NAME_MAX + 1, "%s/%s", prefix, name);
    else
        snprintf(w->name, SL__TAR_NAME_MAX + 1, "%s", name);
}

static int walk(walk_t *w, uint64_t off, sl__tar_fn fn, void *ctx,
                sl__tar_stop_t *stop, char *err, size_t errlen)
{
    uint64_t first = off; /* the member's first header (extensions too) */
    for (;;) {
        if (off == w->size)
            return w->have_long || w->have_size
                       ? bad(w, off, stop, err, errlen,
                             "extension header without its member")
                       : 0;
        int rc = 0;
        const uint8_t *h = at(w, off, BLOCK, err, errlen, &rc);
        if (rc == SL_ECORRUPT || (!h && !rc))
            return bad(w, off, stop, err, errlen,
                       "truncated (the file ends inside a header)");
        if (!h)
            return rc;
        if (all_zero(h))
            return 0;
        if (!checksum_ok(h))
            return bad(w, off, stop, err, errlen, "bad header checksum");
        uint64_t size;
        if (num(h + H_SIZE, 12, &size))
            return bad(w, off, stop, err, errlen, "bad size field");
        char type = (char)h[H_TYPE];
        int regular = type == '0' || type == 0 || type == '7';
        if (regular && w->have_size)
            size = w->pax_size;
        uint64_t data = off + BLOCK;
        if (size > w->size - data) {
            char why[96];
            snprintf(why, sizeof why,
                     "truncated (member of %llu bytes, %llu left in the file)",
                     (unsigned long long)size,
                     (unsigned long long)(w->size - data));
            rc = bad(w, off, stop, err, errlen, why);
            if (stop && regular) { /* its header is sound: name it */
                member_name(w, h);
                snprintf(stop->name, sizeof stop->name, "%s", w->name);
            }
            return rc;
        }
        uint64_t next = data + (size + BLOCK - 1) / BLOCK * BLOCK;
        if (next > w->size)
            next = w->size; /* last member's padding cut off: tolerated */
        if (type == 'L' || type == 'x') {
            if (size > (type == 'L' ? SL__TAR_NAME_MAX : SL__TAR_PAX_MAX))
                return bad(w, off, stop, err, errlen,
                           type == 'L' ? "GNU long name too long"
                                       : "pax header too large");
            char *p = ext_data(w, data, size, err, errlen, &rc);
            if (!p)
                return rc;
            int r = 0;
            if (type == 'L') {
                field(w->longname, (const uint8_t *)p, (size_t)size);
                w->have_long = 1;
            } else {
                r = pax(w, p, (size_t)size);
            }
            free(p);
            if (r)
                return bad(w, off, stop, err, errlen, "malformed pax header");
            off = next;
            continue;
        }
        if (!regular) { /* 'g', 'K', directories, links, ...: skipped */
            if (type != 'K' && type != 'g') {
                w->have_long = 0;
                w->have_size = 0;
                first = next;
            }
            off = next;
            continue;
        }
        member_name(w, h);
        w->have_long = 0;
        w->have_size = 0;
        sl__tar_member_t m = {w->name, first, data, size};
        if ((rc = fn(ctx, &m, err, errlen)))
            return rc;
        off = first = next;
    }
}

int sl__tar_walk(const sl__bytesrc_t *src, uint64_t from, sl__tar_fn fn,
                 void *ctx, sl__tar_stop_t *stop, char *err, size_t errlen)
{
    walk_t w = {.src = src, .size = sl__bytesrc_size(src)};
    w.win = malloc(WINDOW);
    w.name = malloc(SL__TAR_NAME_MAX + 1);
    w.longname = malloc(SL__TAR_NAME_MAX + 1);
    int rc;
    if (!w.win || !w.name || !w.longname)
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    else if (from > w.size || from % BLOCK)
        rc = bad(&w, from, stop, err, errlen, "not a header offset");
    else if (w.size == 0) /* GNU tar and Python's tarfile refuse it too */
        rc = bad(&w, 0, stop, err, errlen, "an empty file, not a tar archive");
    else
        rc = walk(&w, from, fn, ctx, stop, err, errlen);
    free(w.win);
    free(w.name);
    free(w.longname);
    return rc;
}
