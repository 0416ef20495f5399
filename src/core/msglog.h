/* core/msglog: the bounded list of skipped samples / documents both
 * loaders keep (sl_loader_skipped_*, sl_text_loader_skipped_*).
 *
 * Every entry is counted; the first `keep` messages are kept for the
 * log's life, so a pointer handed out stays valid until the loader is
 * destroyed. Its own lock: callers may hold their loader lock (lock
 * order: loader lock, then the log's). */
#ifndef SL_MSGLOG_H
#define SL_MSGLOG_H

#include <pthread.h>
#include <stdint.h>

#define SL_MSGLOG_KEEP 10000 /* messages kept per loader */

typedef struct sl__msglog {
    pthread_mutex_t mu;
    char **msg;
    int64_t count, kept, cap;
    int keep;
} sl__msglog_t;

void sl__msglog_init(sl__msglog_t *g, int keep);
void sl__msglog_free(sl__msglog_t *g);
/* Counts one entry and keeps its message (printf) if there is room; a
 * message that cannot be stored (out of memory) is still counted. */
void sl__msglog_add(sl__msglog_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int64_t sl__msglog_count(sl__msglog_t *g);
/* Message i (0-based, in order), or NULL when out of range / not kept. */
const char *sl__msglog_get(sl__msglog_t *g, int64_t i);

#endif
