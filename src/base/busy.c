#include "base/busy.h"

void sl__busy_init(sl__busy_t *b)
{
    pthread_mutex_init(&b->mu, NULL);
    b->inside = b->since = b->sum = 0;
}

void sl__busy_destroy(sl__busy_t *b)
{
    pthread_mutex_destroy(&b->mu);
}

void sl__busy_enter(sl__busy_t *b, int n, int64_t now_ns)
{
    pthread_mutex_lock(&b->mu);
    if (n > 0 && b->inside == 0)
        b->since = now_ns;
    b->inside += n > 0 ? n : 0;
    pthread_mutex_unlock(&b->mu);
}

void sl__busy_leave(sl__busy_t *b, int n, int64_t now_ns)
{
    pthread_mutex_lock(&b->mu);
    if (b->inside > 0 && n > 0) {
        b->inside = b->inside > n ? b->inside - n : 0;
        if (b->inside == 0 && now_ns > b->since)
            b->sum += now_ns - b->since;
    }
    pthread_mutex_unlock(&b->mu);
}

int64_t sl__busy_ns(sl__busy_t *b, int64_t now_ns)
{
    pthread_mutex_lock(&b->mu);
    int64_t v = b->sum;
    if (b->inside > 0 && now_ns > b->since)
        v += now_ns - b->since;
    pthread_mutex_unlock(&b->mu);
    return v;
}
