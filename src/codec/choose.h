/* codec/choose: picks how one shard's records are stored (`sluice pack
 * --codec auto`, and the dictionary of `--codec zstd-dict`), from
 * measurements on a sample of those records. Depends on base and codec.
 *
 * THE rule (docs/DESIGN.md, "Codec choice at pack time"): each candidate
 * (none, lz4, zstd at levels 1, 3 and 9, zstd at level 3 with a
 * dictionary trained on half of the sample) is measured on the other half
 * of the sample as the writer would store it (a record it does not shrink stays
 * raw, tagged none): its ratio (stored bytes over raw bytes, the dictionary
 * counted once over the whole shard) and its decode cost per raw byte (the
 * fastest of three timed decodes of the sample). Among the candidates
 * whose decode cost stays within the bound (max_dec_ns; none always
 * does), the smallest ratio wins, except that the first candidate in the
 * list above within 0.02 of that ratio is taken instead (a codec must save
 * at least 2 % of the raw bytes over a simpler one to be worth its
 * decode). Size decides; timing only excludes codecs too slow to decode,
 * so a shared machine's noise moves the choice only near the bound. */
#ifndef SL_CODEC_CHOOSE_H
#define SL_CODEC_CHOOSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Candidates, in order of preference on a near tie. */
#define SL__CHOOSE_N 6
/* Bytes of records measured (and trained on) per shard. */
#define SL__CHOOSE_SAMPLE ((size_t)16 << 20)
/* Dictionary capacity: zstd's CLI default (110 KiB), less for small
 * shards (a fiftieth of the sample; zstd advises
 * samples of about 100 times the dictionary). */
#define SL__CHOOSE_DICT ((size_t)112640)
/* Default decode bound: 10 ns per raw byte (100 MB/s on one core, a few
 * per cent of a JPEG decode's cost per byte). */
#define SL__CHOOSE_MAX_DEC_NS 10.0
/* The ratio a codec must beat a simpler one by. */
#define SL__CHOOSE_MARGIN 0.02

typedef struct sl__choose_row {
    const char *name; /* "none", "lz4", "zstd-1", ..., "zstd-dict" */
    int codec, level;
    double ratio;  /* stored / raw over the sample, dictionary included */
    double dec_ns; /* decode time per raw byte */
    int eligible;  /* measured and within the decode bound */
} sl__choose_row_t;

typedef struct sl__choice {
    int codec, level; /* what the shard is written with */
    const char *name; /* its row's name */
    sl__bytes_t dict; /* the dictionary, for SL_CODEC_ZSTD_DICT */
    char note[160];   /* why a requested zstd-dict fell back, or "" */
    sl__choose_row_t rows[SL__CHOOSE_N];
    int nrows; /* rows measured (0 for a plain zstd-dict request) */
} sl__choice_t;

/* The shard's records, laid end to end in `data` (sizes[i] bytes each,
 * n records). auto_mode 1: measures every candidate and picks by the rule
 * (max_dec_ns: the decode bound, ns per raw byte; <= 0: the default); 0: only
 * trains the dictionary
 * (--codec zstd-dict), falling back to plain zstd with c->note set when
 * the records are too few or too small to train on. @return 0 or SL_E*
 * (out of memory). Free c->dict with sl__bytes_free. */
int sl__codec_choose(const uint8_t *data, const size_t *sizes, size_t n,
                     size_t shard_raw, int auto_mode, double max_dec_ns,
                     sl__choice_t *c, char *err, size_t errlen);

#endif
