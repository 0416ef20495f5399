/* data/recfile: one WebDataset tar shard or TFRecord file, indexed once at
 * open so that its samples can be read in any order (the sampler's global
 * permutation, resume) with one ranged read each.
 *
 * The index keeps 32 bytes a sample: where its bytes are, where the image
 * lies inside them, its label. Samples found bad while indexing (a missing
 * image or label, a non-numeric .cls, a bad record CRC, an unparsable
 * Example) keep their place in the numbering and carry their message; with
 * skip_bad they fail when read (so the loader counts and lists them like
 * any bad sample), without it the first one fails the open. Damage that
 * ends the framing (a bad tar header, a truncated member or record, a bad
 * TFRecord length CRC) fails the open, or with skip_bad keeps the samples
 * before it and records the damage as a note (what follows is lost).
 *
 * Reads are thread-safe. Depends on base, data/{bytesrc,tar_walk,crc32c}
 * and protobuf-c (data/tfrecord.c). */
#ifndef SL_RECFILE_H
#define SL_RECFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/membudget.h"
#include "data/bytesrc.h"

enum { SL__FMT_WDS = 1, SL__FMT_TFRECORD = 2 };

/* The largest sample (image member, TFRecord record) accepted: a length
 * above it is a bad sample, never an allocation. */
#define SL__REC_MAX (1u << 30)

typedef struct sl__rec {
    uint64_t off;     /* first byte to read */
    uint64_t hdr;     /* WDS: the image member's first header (its name) */
    uint32_t len;     /* bytes to read */
    uint32_t img_off; /* the image within them */
    uint32_t img_len;
    int32_t label; /* < 0: a bad sample, its SL_E* code (message: bad_msg) */
} sl__rec_t;

typedef struct sl__recfile {
    sl__bytesrc_t *src;
    int fmt; /* SL__FMT_* */
    sl__rec_t *recs;
    int64_t n;
    size_t cap;
    int64_t *bad_idx; /* bad samples, ascending, with their messages */
    char **bad_msg;
    int64_t nbad;
    size_t bad_cap;
    char *damage;       /* what ended the index early (skip_bad), or NULL */
    int from_sidecar;   /* the index came from NAME.slidx (data/recidx) */
    char *sidecar_note; /* why a sidecar there was not used, or NULL */
} sl__recfile_t;

/* Opens and indexes path as fmt. A URL's index comes from its sidecar
 * (NAME.slidx, data/recidx) when there is a usable one: one request, not
 * a walk that fetches the whole file; else the file is walked.
 * @return 0, or an SL_E* with the message naming the file and the sample
 * (key or record number) and the cause. */
int sl__recfile_open(const char *path, int fmt, int skip_bad,
                     sl__recfile_t **out, char *err, size_t errlen);
/* The same over a byte source (taken: closed with the file, or on error). */
int sl__recfile_open_src(sl__bytesrc_t *src, int fmt, int skip_bad,
                         sl__recfile_t **out, char *err, size_t errlen);
/* Opens path and walks it whatever sidecar it has, bad samples and damage
 * kept as under skip_bad: what a sidecar is made from. */
int sl__recfile_walk(const char *path, int fmt, sl__recfile_t **out, char *err,
                     size_t errlen);
void sl__recfile_close(sl__recfile_t *f);

/* Sample k's encoded image into out (out->n set), asking admit (may be
 * NULL) for the bytes before allocating them; TFRecord's data CRC is
 * checked again. *stored: bytes read. A bad sample fails with its
 * message (SL_ECORRUPT or SL_ECHECKSUM). */
int sl__recfile_read(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                     const sl__admit_t *admit, uint64_t *stored, char *err,
                     size_t errlen);
/* The same read in two halves, for a caller that keeps remote reads in
 * flight (exec/aread): begin checks, asks admit and makes the buffer;
 * from a file or memory it reads there and then (io->len 0), from a URL
 * it leaves io->len bytes at io->off of io->remote into io->dst to the
 * caller. end takes that read's result (len, or the SL_E* code with the
 * message why, which is the error as it stands) and finishes (the TFRecord
 * CRC, out->n, *stored). Every begin that returned 0 must be ended;
 * sl__recfile_read is begin, the read, end. */
struct sl__remote;
typedef struct sl__recfile_io {
    struct sl__remote *remote;
    uint8_t *dst;
    size_t len;
    uint64_t off;
} sl__recfile_io_t;
int sl__recfile_read_begin(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                           const sl__admit_t *admit, sl__recfile_io_t *io,
                           char *err, size_t errlen);
int sl__recfile_read_end(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                         int64_t res, const char *why, uint64_t *stored,
                         char *err, size_t errlen);
/* "PATH: sample K (key KEY)" or "PATH: record K", into buf. */
const char *sl__recfile_describe(const sl__recfile_t *f, int64_t k, char *buf,
                                 size_t len);
/* The message of bad sample k, or NULL when k is good. */
const char *sl__recfile_bad(const sl__recfile_t *f, int64_t k);

/* For the indexers (data/wds.c, data/tfrecord.c): appends a sample; a bad
 * one (code: SL_ECORRUPT, SL_ECHECKSUM; 0 for a good one) keeps a copy of
 * msg, which reading it fails with. @return 0 or SL_ENOMEM. */
int sl__recfile_add(sl__recfile_t *f, const sl__rec_t *r, int code,
                    const char *msg);

/* The indexers: fill f->recs from f->src (fmt set). Same errors as open. */
int sl__wds_index(sl__recfile_t *f, int skip_bad, char *err, size_t errlen);
int sl__tfrecord_index(sl__recfile_t *f, int skip_bad, char *err,
                       size_t errlen);
/* WDS: the key of the member whose first header is at hdr, into buf. */
const char *sl__wds_key(const sl__recfile_t *f, uint64_t hdr, char *buf,
                        size_t len);

#endif
