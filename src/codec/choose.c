/* codec/choose: see choose.h for the rule. */
#include "codec/choose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

static const struct {
    const char *name;
    int codec, level;
} cands[SL__CHOOSE_N] = {
    {"none", SL_CODEC_NONE, 0},   {"lz4", SL_CODEC_LZ4, 0},
    {"zstd-1", SL_CODEC_ZSTD, 1}, {"zstd-3", SL_CODEC_ZSTD, 3},
    {"zstd-9", SL_CODEC_ZSTD, 9}, {"zstd-dict", SL_CODEC_ZSTD_DICT, 3},
};

/* The sample: every k-th record, k chosen so the sample holds about
 * SL__CHOOSE_SAMPLE bytes (all records when the shard is smaller); with
 * half 0 or 1 only its even or odd members (a dictionary is trained on one
 * half and measured on the other, as it will meet records it was not
 * trained on: measured on its own training data it looks better than it
 * is); half -1: all of it. */
typedef struct sample {
    const uint8_t **p;
    size_t *n;
    size_t count, bytes;
    uint8_t *flat; /* the sample end to end (ZDICT wants it so) */
} sample_t;

static int take_sample(const uint8_t *data, const size_t *sizes, size_t n,
                       int half, sample_t *s)
{
    memset(s, 0, sizeof *s);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += sizes[i];
    size_t step = total > SL__CHOOSE_SAMPLE ? total / SL__CHOOSE_SAMPLE + 1 : 1;
    s->p = malloc((n / step + 1) * sizeof *s->p);
    s->n = malloc((n / step + 1) * sizeof *s->n);
    if (!s->p || !s->n)
        return SL_ENOMEM;
    const uint8_t *at = data;
    for (size_t i = 0, j = 0; i < n; i++) {
        if (i % step == 0 && (half < 0 || (int)(j++ % 2) == half)) {
            s->p[s->count] = at;
            s->n[s->count++] = sizes[i];
            s->bytes += sizes[i];
        }
        at += sizes[i];
    }
    s->flat = malloc(s->bytes + 1);
    if (!s->flat)
        return SL_ENOMEM;
    size_t off = 0;
    for (size_t i = 0; i < s->count; i++) {
        if (s->n[i])
            memcpy(s->flat + off, s->p[i], s->n[i]);
        off += s->n[i];
    }
    return 0;
}

static void free_sample(sample_t *s)
{
    free(s->p);
    free(s->n);
    free(s->flat);
}

/* Trains c->dict on the sample. 0, or SL_EINVAL with c->note set. */
static int train(const sample_t *s, sl__choice_t *c)
{
    size_t cap = s->bytes / 50;
    if (cap > SL__CHOOSE_DICT)
        cap = SL__CHOOSE_DICT;
    if (cap < 1024)
        cap = 1024;
    return sl__codec_dict_train(s->flat, s->n, (unsigned)s->count, cap,
                                &c->dict, c->note, sizeof c->note);
}

/* Measures candidate k on the sample into row. */
static int measure(const sample_t *s, int k, const sl__codec_dict_t *d,
                   size_t dict_n, size_t shard_raw, double max_dec_ns,
                   sl__choose_row_t *row)
{
    row->name = cands[k].name;
    row->codec = cands[k].codec;
    row->level = cands[k].level;
    size_t maxn = 1;
    for (size_t i = 0; i < s->count; i++)
        if (s->n[i] > maxn)
            maxn = s->n[i];
    sl__bytes_t *z = calloc(s->count + 1, sizeof *z);
    uint8_t *back = malloc(maxn);
    if (!z || !back) {
        free(z);
        free(back);
        return SL_ENOMEM;
    }
    double stored = 0;
    int rc = 0;
    for (size_t i = 0; i < s->count && !rc; i++) {
        if (row->codec == SL_CODEC_NONE ||
            sl__codec_compress_dict(row->codec, row->level, d, s->p[i], s->n[i],
                                    &z[i], NULL, 0) ||
            z[i].n >= s->n[i]) {
            z[i].n = (size_t)-1; /* stored raw: no decode */
            stored += (double)s->n[i];
        } else {
            stored += (double)z[i].n;
        }
    }
    /* The fastest of three decodes of the whole sample: the machine is
     * shared, and noise only ever adds time. */
    double best = -1;
    for (int rep = 0; rep < 3; rep++) {
        int64_t t0 = sl__now_ns();
        for (size_t i = 0; i < s->count; i++)
            if (z[i].n != (size_t)-1)
                sl__codec_decompress_dict(row->codec, d, z[i].p, z[i].n, back,
                                          s->n[i], NULL, 0);
            else if (s->n[i])
                memcpy(back, s->p[i], s->n[i]);
        double t = (double)(sl__now_ns() - t0);
        if (best < 0 || t < best)
            best = t;
    }
    double raw = s->bytes ? (double)s->bytes : 1;
    row->ratio =
        stored / raw + (double)dict_n / (double)(shard_raw ? shard_raw : 1);
    row->dec_ns = best / raw;
    row->eligible = row->codec == SL_CODEC_NONE || row->dec_ns <= max_dec_ns;
    for (size_t i = 0; i < s->count; i++)
        sl__bytes_free(&z[i]);
    free(z);
    free(back);
    return rc;
}

int sl__codec_choose(const uint8_t *data, const size_t *sizes, size_t n,
                     size_t shard_raw, int auto_mode, double max_dec_ns,
                     sl__choice_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    if (max_dec_ns <= 0)
        max_dec_ns = SL__CHOOSE_MAX_DEC_NS;
    sample_t s, t;
    memset(&t, 0, sizeof t);
    /* auto: train on one half, measure on the other (small shards: all
     * of it for both); zstd-dict: train on all of it. */
    int split = auto_mode && n >= 8;
    int rc = take_sample(data, sizes, n, split ? 1 : -1, &s);
    if (!rc && split)
        rc = take_sample(data, sizes, n, 0, &t);
    if (rc) {
        free_sample(&s);
        free_sample(&t);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int trained = !train(split ? &t : &s, c);
    free_sample(&t);
    if (!auto_mode) {
        c->codec = trained ? SL_CODEC_ZSTD_DICT : SL_CODEC_ZSTD;
        c->level = 3;
        c->name = trained ? "zstd-dict" : "zstd-3";
        free_sample(&s);
        return 0;
    }
    sl__codec_dict_t *d = NULL;
    if (trained && sl__codec_dict_load(c->dict.p, c->dict.n, 3, &d, c->note,
                                       sizeof c->note))
        trained = 0;
    for (int k = 0; k < SL__CHOOSE_N && !rc; k++) {
        sl__choose_row_t *row = &c->rows[c->nrows++];
        if (cands[k].codec == SL_CODEC_ZSTD_DICT && !trained) {
            *row = (sl__choose_row_t){
                cands[k].name, cands[k].codec, cands[k].level, 0, 0, 0};
            continue;
        }
        rc = measure(&s, k, d,
                     cands[k].codec == SL_CODEC_ZSTD_DICT ? c->dict.n : 0,
                     shard_raw, max_dec_ns, row);
    }
    sl__codec_dict_free(d);
    free_sample(&s);
    if (rc)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    double min = -1;
    for (int k = 0; k < c->nrows; k++)
        if (c->rows[k].eligible && (min < 0 || c->rows[k].ratio < min))
            min = c->rows[k].ratio;
    for (int k = 0; k < c->nrows; k++)
        if (c->rows[k].eligible &&
            c->rows[k].ratio <= min + SL__CHOOSE_MARGIN) {
            c->codec = c->rows[k].codec;
            c->level = c->rows[k].level;
            c->name = c->rows[k].name;
            break;
        }
    if (c->codec != SL_CODEC_ZSTD_DICT)
        sl__bytes_free(&c->dict);
    return 0;
}
