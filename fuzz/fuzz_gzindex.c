/* Fuzz target: any bytes as a gzip file read through volume/gzindex (the
 * index is built from outside bytes). The bytes are read whole on a memfd
 * (at most 4 MiB of output) while an index with a point every 256 bytes
 * is built; then readers through that index pass over to offsets the
 * input's own bytes pick and read on. Nothing may crash or read out of
 * bounds; a whole read that succeeded is zlib's gzread's bytes, and every
 * read through the index gives the same bytes at its offset (a failed
 * whole read's partial index is used too: it may fail, cleanly). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "volume/gzindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP (4 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static uint8_t *all, *buf;
    if (fd < 0 && (fd = memfd_create("fuzz_gzindex", MFD_CLOEXEC)) < 0)
        abort();
    if (!all && (!(all = malloc(CAP)) || !(buf = malloc(CAP))))
        abort();
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char err[1024] = "";
    int code = 0;
    sl__gzindex_t *ix = sl__gzindex_new(256);
    sl__gzr_t *r;
    if (!ix || sl__gzr_open(fd, "fuzz.gz", NULL, ix, &r, err, sizeof err))
        abort();
    int64_t n = 0, k = 0;
    while (n < CAP && (k = sl__gzr_read(r, all + n, (size_t)(CAP - n), &code,
                                        err, sizeof err)) > 0)
        n += k;
    int whole = n < CAP && k == 0;
    sl__gzr_close(r);
    if (!whole && (!err[0] || !strstr(err, "fuzz.gz")) && n < CAP)
        abort(); /* a failure names the file */
    /* zlib's own gunzip agrees on what a whole read gave */
    if (whole && size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        gzFile g = gzdopen(dup(fd), "rb");
        if (!g)
            abort();
        lseek(fd, 0, SEEK_SET);
        int64_t m = 0;
        int got;
        while (m < CAP && (got = gzread(g, buf + m, (unsigned)(CAP - m))) > 0)
            m += got;
        int zerr;
        gzerror(g, &zerr);
        gzclose(g);
        if (zerr == Z_OK && (m != n || memcmp(buf, all, (size_t)n)))
            abort();
    }
    /* offsets from the input's bytes, read through the index */
    for (size_t t = 0; t < 4 && n > 0; t++) {
        uint32_t h = 2166136261u;
        for (size_t i = t; i < size; i += 97)
            h = (h ^ data[i]) * 16777619u;
        int64_t at = (int64_t)(h % (uint32_t)n),
                len = (int64_t)((h >> 7) % 4096) + 1;
        if (len > n - at)
            len = n - at;
        if (sl__gzr_open(fd, "fuzz.gz", ix, NULL, &r, err, sizeof err))
            abort();
        int64_t s = sl__gzr_read(r, NULL, (size_t)at, &code, err, sizeof err);
        int64_t got =
            s == at ? sl__gzr_read(r, buf, (size_t)len, &code, err, sizeof err)
                    : -1;
        sl__gzr_close(r);
        if (whole &&
            (s != at || got != len || memcmp(buf, all + at, (size_t)len)))
            abort();
    }
    sl__gzindex_free(ix);
    return 0;
}
