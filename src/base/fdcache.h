/* base/fdcache: a bounded set of open read-only descriptors, kept by the
 * least recently used, for readers that come back to the same files in
 * no order (the text loader reads each document of a plain text or JSON
 * Lines corpus when it tokenizes it, docs/TEXT.md). Bounded because a
 * corpus may be thousands of files and the open-files limit (ulimit -n,
 * 1024 by default) is shared with the rest of the process; reused because
 * an open + close per document of a few dozen bytes would cost more than
 * reading it.
 *
 * A descriptor handed out stays open until it is given back (pread only:
 * threads share it, no position). When every cached one is in use, a
 * reader gets one of its own, closed when given back, so a reader never
 * waits on another. Any thread may call any function. Depends on
 * base/file (sl__open_regular). */
#ifndef SL_FDCACHE_H
#define SL_FDCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__fdcache_ent {
    int key, fd, refs;
    uint64_t used; /* the cache's clock at its last use */
} sl__fdcache_ent_t;

#define SL__FDCACHE_MAX 32

typedef struct sl__fdcache {
    pthread_mutex_t mu;
    sl__fdcache_ent_t ent[SL__FDCACHE_MAX];
    int n;
    uint64_t clock;
} sl__fdcache_t;

void sl__fdcache_init(sl__fdcache_t *c);
/* Closes every descriptor; none may be out. */
void sl__fdcache_free(sl__fdcache_t *c);

/* A descriptor of file `key` (the caller's number for `path`), opened
 * through sl__open_regular when not held. @return it (>= 0; give it back
 * with sl__fdcache_put), or sl__open_regular's negative code with
 * "PATH: cause" in err. */
int sl__fdcache_get(sl__fdcache_t *c, int key, const char *path, char *err,
                    size_t errlen);
void sl__fdcache_put(sl__fdcache_t *c, int fd);

#endif
