/* data/ext_out: an ImageFolder written as WebDataset tar shards or
 * TFRecord files (`sluice pack --format webdataset|tfrecord`), for users
 * of those tools and to test the readers against them.
 *
 * WebDataset: shard-000000.tar, ...; sample i is KEY.jpg (or .png) and
 * KEY.cls (the label as ASCII decimal, no newline, as webdataset's
 * ShardWriter writes an int) with KEY = the sample's index, 9 digits;
 * POSIX ustar headers, mode 0644, mtime 0. TFRecord: data-00000.tfrecord,
 * ...; one tf.train.Example a record ("image/encoded", "image/class/label",
 * "image/format"). Beside each file its sidecar index, NAME.slidx
 * (data/recidx), so that a reader at a URL need not walk the file. A new
 * file starts when the next sample would take the
 * open one over shard_size. Each file is written as .NAME.tmp and renamed
 * when complete; OUT must be missing or empty, and a failed pack removes
 * what it wrote. Depends on base, data/{recfile,tfrecord}. */
#ifndef SL_EXT_OUT_H
#define SL_EXT_OUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__ext_out {
    const char *dir;
    int fmt;            /* SL__FMT_WDS or SL__FMT_TFRECORD */
    int64_t shard_size; /* largest file, bytes */
    /* the rest starts at zero */
    int fd;          /* the open file, or -1 (set by begin) */
    char *tmp;       /* its temp path */
    uint64_t cur;    /* its bytes so far */
    long files;      /* files finished or open */
    int64_t samples; /* written */
    uint64_t bytes_out;
    int made_dir;
    void *scratch; /* sl__bytes_t: the Example being built */
} sl__ext_out_t;

/* Checks dir (missing or empty; made when missing). @return 0, or SL_EIO /
 * SL_ESTATE with the message. */
int sl__ext_out_begin(sl__ext_out_t *o, char *err, size_t errlen);
/* Adds one encoded image (name: its file name, for the extension).
 * @return 0, or SL_E* with the message (output errors). */
int sl__ext_out_add(sl__ext_out_t *o, const void *p, size_t n, int64_t label,
                    const char *name, char *err, size_t errlen);
/* Finishes the open file. @return 0 or SL_EIO. */
int sl__ext_out_commit(sl__ext_out_t *o, char *err, size_t errlen);
/* After a failure: removes every file written and the folder if made. */
void sl__ext_out_abort(sl__ext_out_t *o);

#endif
