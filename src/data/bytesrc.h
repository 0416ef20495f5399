/* data/bytesrc: the bytes of one input file as ranges, the only way the
 * WebDataset, TFRecord and sluice shard readers reach storage: "give me LEN
 * bytes at OFFSET". A local file answers with pread; memory (tests,
 * fuzzing) with memcpy; a URL (http://, https://, s3://: data/remote) with
 * ranged requests behind the same call, so the indexers and the read path
 * need no change for it. Reads are thread-safe (pread, or one request each;
 * no shared position). Depends on base, data/remote. */
#ifndef SL_BYTESRC_H
#define SL_BYTESRC_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__bytesrc sl__bytesrc_t;

/* Opens a local regular file (sl__open_regular: never waits on a FIFO), or
 * a URL (sl__remote_is_url: its size from the server).
 * @return 0, or SL_ENOTFOUND / SL_EIO / SL_ESYSTEM / SL_EUNSUPPORTED (a URL
 * in a build without libcurl) with the message. */
int sl__bytesrc_open_file(const char *path, sl__bytesrc_t **out, char *err,
                          size_t errlen);
/* 1 when s reads through requests (a URL), where each read costs a round
 * trip. */
int sl__bytesrc_is_remote(const sl__bytesrc_t *s);
/* A hint for one thread's sequential pass (an indexer walking a file):
 * with on set, a remote source serves reads of up to a quarter of
 * SL__BYTESRC_AHEAD from one read-ahead window of SL__BYTESRC_AHEAD bytes,
 * so walking a remote tar's headers or a TFRecord's records costs one
 * request per window instead of one or two per member; off frees the
 * window. Only one thread may read while it is on. No effect on local or
 * memory sources. @return 0 or SL_ENOMEM (on: then reads stay direct). */
#define SL__BYTESRC_AHEAD (4u << 20)
int sl__bytesrc_sequential(sl__bytesrc_t *s, int on);
/* The object behind a URL source (its reads may go elsewhere: a multi
 * engine, data/remote_multi); NULL for a local or memory source. */
struct sl__remote;
struct sl__remote *sl__bytesrc_remote(const sl__bytesrc_t *s);
/* Bytes in memory, not copied (p must outlive the source); name is used in
 * messages. @return 0 or SL_ENOMEM. */
int sl__bytesrc_open_mem(const void *p, size_t n, const char *name,
                         sl__bytesrc_t **out, char *err, size_t errlen);
void sl__bytesrc_close(sl__bytesrc_t *s);

/* The name given at open (the path), and the size at open. */
const char *sl__bytesrc_name(const sl__bytesrc_t *s);
uint64_t sl__bytesrc_size(const sl__bytesrc_t *s);

/* Reads exactly len bytes at off into buf. Fewer (the file ends first, or
 * shrank since open) is SL_ECORRUPT "NAME: truncated: ..."; a failed read
 * is SL_EIO / SL_ESYSTEM (sl__errno_code). Any thread. */
int sl__bytesrc_read(const sl__bytesrc_t *s, uint64_t off, void *buf,
                     size_t len, char *err, size_t errlen);

#endif
