/* Fuzz target: any bytes as a volume record of a pack (volume/volrec, as
 * `sluice pack --volumes` writes them): the layout is parsed, then every
 * volume it holds is loaded from memory (NIfTI header decode and checks,
 * conversion, affine, RAS) under a 16 MB max_bytes; and the same record
 * read in order (sl__volrec_seek, a volume loaded through a stream over
 * it, as a pack's record is streamed) agrees with the parse and the load
 * from memory. Nothing may crash or read outside the bytes; a parsed
 * record's parts lie inside them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "volume/vol_internal.h"
#include "volume/volrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The record's bytes as a source read in order (as a pack's record is
 * streamed): exact reads, a failure past the end. */
typedef struct mem_src {
    const uint8_t *p;
    size_t n, at;
} mem_src_t;

static int ms_read(void *ctx, void *dst, size_t n, char *err, size_t errlen)
{
    mem_src_t *m = ctx;
    if (n > m->n - m->at)
        return sl__fail(err, errlen, SL_ECORRUPT, "past the end");
    if (dst)
        memcpy(dst, m->p + m->at, n);
    m->at += n;
    return 0;
}

static int ms_finish(void *ctx, char *err, size_t errlen)
{
    mem_src_t *m = ctx;
    return ms_read(m, NULL, m->n - m->at, err, errlen);
}

static void ms_close(void *ctx)
{
    (void)ctx;
}

/* Volume k read in order: its place agrees with the parse's (parsed: r,
 * else NULL), and its volume, loaded through the stream, with the load
 * from memory (want: that load's result code and volume). */
static void seek_and_load(const uint8_t *data, size_t size, unsigned k,
                          const sl__volrec_t *r, const sl_volume_options_t *o)
{
    mem_src_t m = {data, size, 0};
    sl__vol_src_t src = {ms_read, ms_finish, ms_close, &m};
    unsigned count;
    uint8_t hdr[SL__NIFTI2_HDR];
    size_t hlen;
    uint64_t dlen, skip;
    char err[1024];
    if (sl__volrec_seek(&src, size, "fuzz", k, &count, hdr, &hlen, &dlen, &skip,
                        err, sizeof err)) {
        if (r && k < (unsigned)r->count)
            abort();
        return;
    }
    if (r && (count != (unsigned)r->count || hlen != r->part[k].hlen ||
              dlen != r->part[k].dlen || memcmp(hdr, r->part[k].hdr, hlen) ||
              skip > size - m.at || data + m.at + skip != r->part[k].data))
        abort();
    if (sl__volrec_skipping(&src, skip))
        return;
    sl__nifti_stream_t *n = NULL;
    sl_volume_t *v = NULL, *w = NULL;
    int rc = sl__nifti_stream_src(hdr, hlen, dlen, "fuzz", &src, &n, err,
                                  sizeof err);
    if (!rc)
        rc = sl__nifti_stream_load(n, o, NULL, &v, err, sizeof err);
    sl__nifti_stream_close(n);
    if (r) {
        const struct sl__volrec_part *p = &r->part[k];
        int want = sl__nifti_load_mem(p->hdr, p->hlen, p->data, (size_t)p->dlen,
                                      "fuzz", o, NULL, &w, err, sizeof err);
        if ((rc == 0) != (want == 0) ||
            (v && (v->data_bytes != w->data_bytes ||
                   memcmp(v->data, w->data, v->data_bytes))))
            abort();
    }
    sl_volume_free(v);
    sl_volume_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    sl__volrec_t r;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.max_bytes = 16 << 20;
    int bad = sl__volrec_parse(data, size, &r, err, sizeof err);
    for (unsigned k = 0; k < 2; k++)
        seek_and_load(data, size, k, bad ? NULL : &r, &o);
    if (bad)
        return 0;
    for (int k = 0; k < r.count; k++) {
        const struct sl__volrec_part *p = &r.part[k];
        if (p->hdr < data || p->hdr + p->hlen > data + size || p->data < data ||
            p->data + p->dlen > data + size)
            abort();
        for (int orient = 0; orient < 2; orient++) {
            o.orient = orient;
            sl_volume_t *v = NULL;
            if (!sl__nifti_load_mem(p->hdr, p->hlen, p->data, (size_t)p->dlen,
                                    "fuzz", &o, NULL, &v, err, sizeof err) &&
                (!v || !v->data))
                abort();
            sl_volume_free(v);
        }
    }
    return 0;
}
