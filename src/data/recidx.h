/* data/recidx: a WebDataset tar's or TFRecord file's index (data/recfile)
 * kept in a sidecar file beside it, NAME.slidx, so that a remote file is
 * indexed with one small request instead of a walk that fetches it whole
 * (and then fetches every sample again by range in epoch 1).
 *
 * Written by `sluice pack --format webdataset|tfrecord` beside each file
 * and by `sluice index` for files made elsewhere; read by
 * sl__recfile_open_src for a URL source only (a local walk reads a tar's
 * headers alone). Absent: the walk, as before. Present but unusable
 * (another format, made for a file of another size, damaged, failing to
 * download): the walk, and the reason kept in f->sidecar_note. The stream
 * is the same either way: the sidecar holds exactly what the walk finds.
 *
 * Layout (little-endian): "SLUICEIX", u32 version 1, u32 format
 * (SL__FMT_*), u64 the file's size, u64 samples, u64 bad samples, u32
 * damage bytes, u32 0; per sample off u64, hdr u64, len u32, img_off u32,
 * img_len u32, label i32 (< 0: the bad sample's SL_E* code); per bad
 * sample index u64, message bytes u32, the message; the damage message;
 * XXH3-64 of all before it. Messages are stored without the leading
 * "NAME: " (the name at indexing time) and given the reader's name back.
 * Every count is checked against the bytes left and every sample against
 * the file's size before anything is allocated or used.
 * Depends on base, data/{bytesrc,recfile}, xxhash. */
#ifndef SL_RECIDX_H
#define SL_RECIDX_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "data/recfile.h"

#define SL__RECIDX_SUFFIX ".slidx"
#define SL__RECIDX_MSG_MAX 4096 /* longest stored message */

/* Why sample r cannot stand in a file of fsize bytes of format fmt (its
 * header or bytes past the end, its image out of its format's place, a
 * label out of range, a bad sample's code not a data error), or NULL: the
 * rule sl__recidx_decode holds every sample to. */
const char *sl__recidx_check(const sl__rec_t *r, int fmt, uint64_t fsize);
/* f's index (f->recs, bad samples, damage) as sidecar bytes into out
 * (out->n set). @return 0 or SL_ENOMEM. */
int sl__recidx_encode(const sl__recfile_t *f, sl__bytes_t *out);
/* Fills f (src and fmt set, no samples yet) from sidecar bytes p[0..n).
 * @return 0, or SL_ECORRUPT / SL_ENOMEM with why in err (no name); on
 * error f holds no samples. */
int sl__recidx_decode(sl__recfile_t *f, const uint8_t *p, size_t n, char *err,
                      size_t errlen);
/* Writes path + SL__RECIDX_SUFFIX for f (written whole as a temp file,
 * then renamed). @return 0 or SL_EIO / SL_ENOMEM with the message. */
int sl__recidx_save(const sl__recfile_t *f, const char *path, char *err,
                    size_t errlen);
/* Reads the sidecar of f's source (its name + SL__RECIDX_SUFFIX) into f.
 * @return 0; SL_ENOTFOUND when there is none; another SL_E* when it
 * cannot be used (err says why, naming the sidecar). */
int sl__recidx_load(sl__recfile_t *f, char *err, size_t errlen);

#endif
