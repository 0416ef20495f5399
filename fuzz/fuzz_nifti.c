/* Fuzz target: any bytes as a NIfTI file (volume/nifti), plain or gzip
 * (the bytes decide: a gzip magic is read as gzip). The header decoder runs
 * on the bytes in memory; the whole load (header, size checks against the
 * file and the gzip bound, the data through zlib, conversion, the affine
 * and orientation math) runs on a memfd holding them, as stored and as
 * RAS. Nothing may crash, read out of bounds or allocate past the
 * max_bytes given (16 MB; libFuzzer's -rss_limit_mb catches more); a load
 * that succeeds has sane dims and data_bytes, and its RAS array holds the
 * same values as the stored one (a permutation), and a reader
 * (sl_volume_reader_t) of the file, a few values at a time, gives the
 * stored one's values in order (and skipping values between reads, the
 * values at their place). The pack path (sl__nifti_read_stored) keeps the
 * header and data as stored, within the same max_bytes, and loading them
 * from memory gives the file's volume. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "volume/gzindex.h"
#include "volume/vol_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void check(const sl_volume_t *v)
{
    if (v->ndim < 1 || v->ndim > 4)
        abort();
    uint64_t n = 1;
    for (int i = 0; i < 4; i++) {
        if (v->dim[i] < 1 || (i >= v->ndim && v->dim[i] != 1))
            abort();
        n *= (uint64_t)v->dim[i];
    }
    if (v->data_bytes != n * sl_volume_dtype_size(v->dtype) || !v->data)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    char err[1024];
    sl__volhdr_t h;
    (void)sl__nifti_header(data, size, &h, err, sizeof err);

    if (fd < 0 && (fd = memfd_create("fuzz_nifti", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.max_bytes = 16 << 20;
    sl_volume_t *a = NULL, *b = NULL;
    int ra = sl__nifti_read(fd, "fuzz.nii", (int64_t)size, &o, NULL, &a, err,
                            sizeof err);
    o.orient = SL_VOLUME_RAS;
    int rb = sl__nifti_read(fd, "fuzz.nii", (int64_t)size, &o, NULL, &b, err,
                            sizeof err);
    if (ra == 0) {
        check(a);
        /* A reader of the same file, in pieces of 3 values, gives the same
         * values (before the sort below). */
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        sl_volume_reader_t *r = NULL;
        size_t n = a->data_bytes / 4;
        float *f = malloc(n ? n * 4 : 1);
        if (!f || sl_volume_reader_open(path, NULL, &r, err, sizeof err))
            abort();
        for (size_t at = 0; at < n; at += 3)
            if (sl_volume_reader_read(r, f + at,
                                      n - at < 3 ? (int64_t)(n - at) : 3, err,
                                      sizeof err))
                abort();
        if (memcmp(f, a->data, a->data_bytes))
            abort();
        sl_volume_reader_close(r);
        /* Skipping 2 of every 5 values, the reads give theirs. */
        if (sl_volume_reader_open(path, NULL, &r, err, sizeof err))
            abort();
        for (size_t at = 0; at < n; at += 5) {
            size_t k = n - at < 2 ? n - at : 2;
            if (sl_volume_reader_skip(r, (int64_t)k, err, sizeof err))
                abort();
            size_t m = n - at - k < 3 ? n - at - k : 3;
            if (m &&
                (sl_volume_reader_read(r, f, (int64_t)m, err, sizeof err) ||
                 memcmp(f, (const float *)a->data + at + k, m * 4)))
                abort();
        }
        sl_volume_reader_close(r);
        /* Through a gzip index (volume/gzindex): built by a whole read
         * (a point every 64 bytes), then used to pass over the first
         * half: the same values. */
        sl__gzindex_t *ix = sl__gzindex_new(64);
        if (!ix ||
            sl__volume_reader_indexed(path, NULL, ix, &r, err, sizeof err) ||
            sl_volume_reader_read(r, f, (int64_t)n, err, sizeof err) ||
            memcmp(f, a->data, a->data_bytes))
            abort();
        sl_volume_reader_close(r);
        if (sl__volume_reader_indexed(path, ix, NULL, &r, err, sizeof err) ||
            sl_volume_reader_skip(r, (int64_t)(n / 2), err, sizeof err) ||
            sl_volume_reader_read(r, f, (int64_t)(n - n / 2), err,
                                  sizeof err) ||
            memcmp(f, (const float *)a->data + n / 2, (n - n / 2) * 4))
            abort();
        sl_volume_reader_close(r);
        sl__gzindex_free(ix);
        free(f);
    } else { /* a bad file through an index fails cleanly too */
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        sl__gzindex_t *ix = sl__gzindex_new(64);
        sl_volume_reader_t *r = NULL;
        static double f[4096]; /* 4096 values of any type */
        if (ix &&
            !sl__volume_reader_indexed(path, NULL, ix, &r, err, sizeof err)) {
            const sl_volume_t *v = sl_volume_reader_volume(r);
            int64_t n = v->dim[0] * v->dim[1] * v->dim[2] * v->dim[3];
            for (int64_t at = 0; at < n; at += 4096)
                if (sl_volume_reader_read(r, f, n - at < 4096 ? n - at : 4096,
                                          err, sizeof err))
                    break;
        }
        sl_volume_reader_close(r);
        sl__gzindex_free(ix);
    }
    if (rb == 0)
        check(b);
    /* The pack path (sl__nifti_read_stored, `sluice pack --volumes`): the
     * header and data as stored, within the same max_bytes; loaded from
     * memory they give what the file gave. */
    sl__bytes_t st = {0};
    size_t hl;
    int64_t dl;
    if (!sl__nifti_read_stored(fd, "fuzz.nii", (int64_t)size, o.max_bytes, &st,
                               &hl, &dl, err, sizeof err)) {
        if (dl < 0 || st.n != hl + (size_t)dl)
            abort();
        sl_volume_t *c = NULL;
        o.orient = SL_VOLUME_AS_STORED;
        int rc = sl__nifti_load_mem(st.p, hl, st.p + hl, (size_t)dl, "fuzz.nii",
                                    &o, NULL, &c, err, sizeof err);
        if (rc == 0 && (ra != 0 || c->data_bytes != a->data_bytes ||
                        memcmp(c->data, a->data, a->data_bytes)))
            abort();
        sl_volume_free(c);
    }
    sl__bytes_free(&st);
    if (ra == 0 && rb == 0) { /* float32 values: the same multiset */
        size_t n = a->data_bytes / 4;
        if (b->data_bytes != a->data_bytes)
            abort();
        qsort(a->data, n, 4, cmp_u32);
        qsort(b->data, n, 4, cmp_u32);
        if (memcmp(a->data, b->data, a->data_bytes))
            abort();
    }
    sl_volume_free(a);
    sl_volume_free(b);
    return 0;
}
