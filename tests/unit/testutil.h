/* Helpers shared by the unit tests. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the four above first: its own block, so that sorting the
 * includes (clang-format) keeps it last. */
#include <cmocka.h>

#include "sluice/sluice.h"

/* A fresh empty directory under SL_TEST_TMP (or /tmp); caller frees. */
char *tu_tmpdir(const char *tag);
/* Writes bytes to path; returns 0. */
int tu_write_file(const char *path, const void *p, size_t n);
/* tu_write_file of dir/name (a corpus file, a fixture). */
void tu_write_at(const char *dir, const char *name, const void *p, size_t n);
/* The next of a xorshift64 sequence in *x (nonzero): test inputs. */
uint64_t tu_rnd(uint64_t *x);
/* in[0..n) in base64 at out (4 * ceil(n / 3) bytes, no NUL): the tokens
 * of a tiktoken rank file. Returns the length written. */
size_t tu_b64(const uint8_t *in, size_t n, char *out);
/* Reads a whole file; caller frees; NULL on error. */
uint8_t *tu_read_file(const char *path, size_t *n);
/* ../shared/data/<sub>, or NULL (and prints why) when absent. Caller frees. */
char *tu_shared_data(const char *sub);
/* A fresh ImageFolder tree of classes x per_class small synthetic JPEGs
 * (w x h, classes c0.., pixels a function of class and index); caller
 * frees the path. */
char *tu_jpeg_tree(const char *tag, int classes, int per_class, int w, int h);
/* The classes x per_class images of a tu_jpeg_tree at root again in one
 * zstd shard at <root>.sls, each keyed by its path under root and labelled
 * by its class; caller frees the path. */
char *tu_jpeg_shard(const char *root, int classes, int per_class);
/* A tu_jpeg_tree and its tu_jpeg_shard, for a group's setup: *root, *shard;
 * tu_tree_shard_remove removes and frees both. */
void tu_tree_shard(const char *tag, int classes, int per_class, int w, int h,
                   char **root, char **shard);
void tu_tree_shard_remove(char *root, char *shard);
/* Starts l at the beginning and reads it to the end: a digest of the
 * stream (pixels, labels and indices, in order); *samples the samples. */
uint64_t tu_stream_digest(sl_loader_t *l, int64_t *samples);
/* A photo of the ImageNet sample as tu_photos gives it: its path, the
 * file's bytes, its pixels decoded at full size by libjpeg-turbo
 * (sl__image_decode_full: RGB, w x h; rgb_n bytes, SL__IMAGE_SLACK past
 * them) and its number among those visited (0..). */
typedef struct tu_photo {
    const char *path;
    const uint8_t *bytes;
    size_t n;
    const uint8_t *rgb;
    size_t rgb_n;
    int w, h, i;
} tu_photo_t;
/* Walks ../shared/data/imagenet-sample/CLASS/FILE (directory order), each
 * photo read and decoded (asserted to succeed) and given to fn: at most
 * `limit` photos, at most `per_class` of a class (0: no such limit). The
 * number visited, or -1 (printing why) when the sample is absent. */
int tu_photos(int limit, int per_class,
              void (*fn)(void *ctx, const tu_photo_t *p), void *ctx);
/* rm -rf */
void tu_rmtree(const char *path);
/* A watchdog that turns a hang (or a quadratic blow-up) into a failure:
 * after `sec` seconds of wall time (cpu = 0) or of this process's CPU time
 * (cpu = 1: a busy machine or a sanitizer build does not trip it) it
 * prints "watchdog: WHAT" and exits 1. sec = 0 disarms it. */
void tu_watchdog(unsigned sec, int cpu, const char *what);
#endif
