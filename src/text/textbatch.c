/* text/textbatch: epoch plans, group shuffles, lm windows, mlm instances. */
#include "textbatch.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"

void sl__text_permute(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch,
                      uint64_t item, uint32_t purpose)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    sl__rng_t r;
    sl__rng_init(&r, seed, (uint64_t)epoch, item, purpose);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)sl__rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

int sl__text_plan_make(sl__text_plan_t *p, const sl__textsrc_t *src,
                       uint64_t seed, int64_t epoch, int shuffle,
                       uint64_t chunk_bytes)
{
    int64_t n = sl__textsrc_count(src);
    if (p->ndocs != n || !p->order) {
        sl__text_plan_free(p);
        p->order = malloc((size_t)(n ? n : 1) * sizeof *p->order);
        p->chunk_start = malloc((size_t)(n + 1) * sizeof *p->chunk_start);
        if (!p->order || !p->chunk_start) {
            sl__text_plan_free(p);
            return SL_ENOMEM;
        }
        p->ndocs = n;
    }
    if (shuffle)
        sl__text_permute(p->order, n, seed, epoch, 0, SL_RNG_TEXT_DOCS);
    else
        for (int64_t i = 0; i < n; i++)
            p->order[i] = i;
    int64_t c = 0;
    uint64_t acc = 0;
    p->chunk_start[c++] = 0;
    for (int64_t k = 0; k < n; k++) {
        acc += sl__textsrc_size(src, p->order[k]);
        if (acc >= chunk_bytes && k + 1 < n) {
            p->chunk_start[c++] = k + 1;
            acc = 0;
        }
    }
    p->chunk_start[c] = n;
    p->nchunks = n ? c : 0;
    p->epoch = epoch;
    return 0;
}

void sl__text_plan_free(sl__text_plan_t *p)
{
    free(p->order);
    free(p->chunk_start);
    memset(p, 0, sizeof *p);
    p->epoch = -1;
}

size_t sl__text_sample_width(const sl__text_spec_t *sp)
{
    return sp->task == SL__TEXT_LM ? (size_t)sp->seq_len + 1
                                   : 4 * (size_t)sp->seq_len;
}

/* One instance of k pieces (piece i = ids[pb[i] .. pe[i])): [CLS] A [SEP]
 * (B [SEP]), A the first ceil(k/2) pieces; then the mask. */
static void mlm_emit(const sl__text_spec_t *sp, const int32_t *ids,
                     const size_t *pb, const size_t *pe, size_t k,
                     uint64_t seed, int64_t epoch, uint64_t item, int32_t *out)
{
    int M = sp->seq_len;
    int32_t *in = out, *lab = out + M, *att = out + 2 * M, *typ = out + 3 * M;
    size_t a = (k + 1) / 2;
    int pos = 0;
    in[pos] = sp->cls, typ[pos++] = 0;
    for (size_t i = 0; i < k; i++) {
        int t = i < a ? 0 : 1;
        for (size_t j = pb[i]; j < pe[i]; j++)
            in[pos] = ids[j], typ[pos++] = t;
        if (i + 1 == a || i + 1 == k)
            in[pos] = sp->sep, typ[pos++] = t;
    }
    int real = pos;
    for (int i = 0; i < M; i++) {
        att[i] = i < real;
        lab[i] = -100;
    }
    for (; pos < M; pos++)
        in[pos] = sp->pad, typ[pos] = 0;
    sl__rng_t r;
    sl__rng_init(&r, seed, (uint64_t)epoch, item, SL_RNG_TEXT_MASK);
    for (int i = 0; i < real; i++) {
        int32_t t = in[i];
        if (t == sp->cls || t == sp->sep || t == sp->pad)
            continue;
        if (sl__rng_double(&r) >= sp->mask_prob)
            continue;
        lab[i] = t;
        double v = sl__rng_double(&r);
        if (v < 0.8)
            in[i] = sp->mask;
        else if (v < 0.9)
            in[i] = (int32_t)sl__rng_below(&r, (uint64_t)sp->vocab_size);
    }
}

int64_t sl__text_mlm_build(const sl__text_spec_t *sp, const int32_t *ids,
                           const size_t *doc_end, size_t ndocs, int64_t epoch,
                           int64_t chunk, sl__ids_t *out)
{
    size_t P = (size_t)sp->seq_len - 3; /* largest piece */
    size_t width = sl__text_sample_width(sp);
    size_t pb[4096], pe[4096]; /* pieces of the instance being packed */
    size_t k = 0, len = 0, beg = 0;
    int64_t made = 0;
    for (size_t d = 0; d <= ndocs; d++) {
        size_t end = d < ndocs ? doc_end[d] : beg;
        for (;;) {
            size_t plen = end - beg < P ? end - beg : P;
            int last = d == ndocs;
            /* close the instance when the next piece would not fit, or at
             * the end of the chunk */
            if (k && (last || len + plen + 3 > (size_t)sp->seq_len ||
                      k == sizeof pb / sizeof pb[0])) {
                if (sl__array_reserve(&out->v, &out->cap, out->n + width,
                                      sizeof *out->v, 4096))
                    return SL_ENOMEM;
                mlm_emit(sp, ids, pb, pe, k, sp->seed, epoch,
                         ((uint64_t)chunk << 32) | (uint64_t)made,
                         out->v + out->n);
                out->n += width;
                made++;
                k = 0, len = 0;
            }
            if (last || plen == 0)
                break;
            pb[k] = beg, pe[k] = beg + plen, k++;
            len += plen;
            beg += plen;
        }
        beg = end;
    }
    return made;
}
