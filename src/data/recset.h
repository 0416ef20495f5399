/* data/recset: a dataset of WebDataset tar shards or TFRecord files, as
 * data/source reads it: a list of files (one path, or a brace pattern,
 * data/brace), each indexed at open (data/recfile), their samples numbered
 * in list order, so the sampler's global permutation, seed, epoch and
 * resume work as for any source.
 *
 * Which format: a "webdataset:" or "tfrecord:" prefix names it; else the
 * first file's extension (.tar; .tfrecord, .tfrecords, .tfrec); else its
 * first bytes (a ustar magic; a TFRecord length CRC that matches), so that
 * ImageNet's extension-less "train-00000-of-01024" files need no prefix.
 * Files may be URLs (data/remote), and an s3:// prefix ending in '/' lists
 * its objects (those named as files of the format, in key order).
 * Labels are the files' integers; classes are numbered 0..max label.
 * Depends on base, data/{brace,recfile,remote}. */
#ifndef SL_RECSET_H
#define SL_RECSET_H

#include <stddef.h>
#include <stdint.h>

#include "data/recfile.h"

/* The format spec names (SL__FMT_*), or 0 for another kind of source (a
 * folder, a sluice shard or pack); *files gets the spec without its
 * prefix. A brace pattern of another format is 0 too (the open fails). */
int sl__recset_format(const char *spec, const char **files);
/* 1 when spec is a listing: an s3:// URL ending in '/' (a prefix), whose
 * objects are the files. */
int sl__recset_is_listing(const char *spec);
/* The file names of spec: its brace expansion (data/brace), or for a
 * listing the objects under the prefix (data/remote; none is
 * SL_ENOTFOUND). sl__strv_free(*names, *n). */
int sl__recset_names(const char *spec, char ***names, int *n, char *err,
                     size_t errlen);
/* "webdataset", "tfrecord". */
const char *sl__recset_format_name(int fmt);

typedef struct sl__recset {
    int fmt;
    int nfiles;
    sl__recfile_t **files;
    int64_t *first; /* nfiles + 1: file k holds [first[k], first[k+1]) */
    int64_t max_label;
    int nnotes;
    char **notes; /* files left out, damage that cut a file short */
    int nwarns;
    char **warns; /* sidecar indexes not used (the file was walked) */
} sl__recset_t;

/* Expands and indexes every file of spec. With skip_bad a file that cannot
 * be opened or is damaged is noted (its samples, or those after the
 * damage, are lost) and bad samples fail when read; without, the first
 * fails the open. No readable sample at all is SL_ENOTFOUND. Files at
 * URLs are opened by up to 16 threads at once (each open is round trips);
 * what the set holds, its notes and which error fails it are those of
 * opening them in order. */
int sl__recset_open(const char *spec, int skip_bad, sl__recset_t **out,
                    char *err, size_t errlen);
void sl__recset_close(sl__recset_t *r);

int64_t sl__recset_count(const sl__recset_t *r);
/* The file holding sample i, and i's number in it. */
const sl__recfile_t *sl__recset_locate(const sl__recset_t *r, int64_t i,
                                       int64_t *k);

#endif
