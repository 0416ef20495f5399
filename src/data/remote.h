/* data/remote: objects behind URLs, read as byte ranges -- http://,
 * https:// and s3://bucket/key -- through libcurl (component SL_CURL; off,
 * data/off/remote_off.c answers every call with "sluice was built without
 * libcurl"). data/bytesrc routes a URL here, so every reader that reaches
 * storage through bytesrc (WebDataset, TFRecord, sluice shards) reads URLs.
 *
 * A request: one easy handle per thread (connections kept and reused),
 * a connect timeout, a stall limit (fewer than 1 KiB/s for SL_HTTP_STALL_S
 * seconds), and up to SL_HTTP_RETRIES retries with exponential backoff
 * from SL_HTTP_BACKOFF_MS for 5xx, 408, 429, refused or reset connections,
 * stalls and short bodies; 4xx other than those fail at once. Each request
 * has a deadline scaled to its size (its bytes at SL_HTTP_MIN_RATE on top
 * of the connect and stall limits). The final
 * error names the URL, the range and the cause; a missing object is
 * SL_ENOTFOUND, anything else SL_EIO (a data error: --on-error skip lists
 * it). s3:// is signed with SigV4 by libcurl (data/s3: credentials,
 * endpoint, listing). Thread-safe. Depends on base, data/remote_parse,
 * libcurl, libxml2 (s3 listing). */
#ifndef SL_REMOTE_H
#define SL_REMOTE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct sl__remote sl__remote_t;

/* One piece of a scattered read (sl__rmulti_readv): len bytes of the range
 * go to buf, or, with buf NULL, are received and dropped (a gap between
 * two records read with one request). */
typedef struct sl__rseg {
    void *buf;
    size_t len;
} sl__rseg_t;

/* Opens url (its size from HEAD, or from a one-byte ranged GET when HEAD
 * gives none). @return 0 and *out, *size; or SL_ENOTFOUND / SL_EIO /
 * SL_EUNSUPPORTED (no libcurl, an unknown scheme) with the message. */
int sl__remote_open(const char *url, sl__remote_t **out, uint64_t *size,
                    char *err, size_t errlen);
/* Exactly len bytes at off (a ranged GET, retried). Any thread. */
int sl__remote_read(sl__remote_t *r, uint64_t off, void *buf, size_t len,
                    char *err, size_t errlen);
void sl__remote_close(sl__remote_t *r);

/* The whole object at url, at most max bytes (more is SL_ERANGE), into
 * out (out->n set). */
int sl__remote_get(const char *url, size_t max, sl__bytes_t *out, char *err,
                   size_t errlen);

/* This thread's blocking requests (sl__remote_open, _read, _get) end at
 * once, failed with "stopped" and not retried, once *flag is nonzero (it
 * is looked at from libcurl's progress callback, at least once a second);
 * NULL: never. The loader's read threads pass its halt flag, so a stop
 * does not wait for a slow read. */
void sl__remote_stop_on(const atomic_int *flag);

/* url as it may be printed: its userinfo as "***" (before "@host"),
 * and the values of presigned URLs' secret query parameters
 * (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, sig, token)
 * as "***"; word for word when it holds none. Every message about a URL
 * names it so (r's name). @return a copy to free(), or NULL (out of
 * memory). Any thread. */
char *sl__remote_redact(const char *url);
/* r's URL as given (to build another request from: its sidecar) and as
 * printed (sl__remote_redact); valid while r is open. */
const char *sl__remote_given(const sl__remote_t *r);
const char *sl__remote_name(const sl__remote_t *r);

/* s3://bucket/prefix: every object under prefix (ListObjectsV2, all pages)
 * as "s3://bucket/key", in the store's (lexicographic) order, into *names
 * (sl__strv_free(*names, *n)). Other schemes: SL_EUNSUPPORTED. */
int sl__remote_list(const char *url, char ***names, int *n, char *err,
                    size_t errlen);

#endif
