/* data/bytesrc: the bytes of one input file as ranges, the only way the
 * WebDataset and TFRecord readers (data/wds, data/tfrecord) reach storage:
 * "give me LEN bytes at OFFSET". A local file answers with pread; memory
 * (tests, fuzzing) with memcpy; a remote object (issue 15 item 1) will
 * answer with ranged requests behind the same call, so the indexers and the
 * read path need no change for it. Reads are thread-safe (pread; no shared
 * file position). Depends on base. */
#ifndef SL_BYTESRC_H
#define SL_BYTESRC_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__bytesrc sl__bytesrc_t;

/* Opens a local regular file (sl__open_regular: never waits on a FIFO).
 * @return 0, or SL_ENOTFOUND / SL_EIO / SL_ESYSTEM with the message. */
int sl__bytesrc_open_file(const char *path, sl__bytesrc_t **out, char *err,
                          size_t errlen);
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
