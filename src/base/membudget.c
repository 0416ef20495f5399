#include "base/membudget.h"

#include "base/base.h"

void sl__membudget_init(sl__membudget_t *b, int64_t limit)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->limit = limit > 0 ? limit : 0;
    b->used = b->peak = 0;
    b->ticket = b->serving = 0;
    b->stopped = 0;
    b->note = NULL;
}

void sl__membudget_destroy(sl__membudget_t *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

/* A charge larger than the whole limit: never fits. */
static int too_big(const sl__membudget_t *b, int64_t bytes, const char *what,
                   char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_ENOMEM,
                    "%s needs %.1f MB, the memory budget allows %.1f MB%s",
                    what ? what : "a sample", (double)bytes / (1 << 20),
                    (double)b->limit / (1 << 20), b->note ? b->note : "");
}

int sl__membudget_try_charge(sl__membudget_t *b, int64_t bytes,
                             const char *what, char *err, size_t errlen)
{
    if (bytes <= 0)
        return 0;
    if (b->limit && bytes > b->limit)
        return too_big(b, bytes, what, err, errlen);
    pthread_mutex_lock(&b->mu);
    int rc =
        b->stopped ? 1
        : b->ticket != b->serving || (b->limit && b->used + bytes > b->limit)
            ? SL__MEMBUDGET_LATER
            : 0;
    if (!rc) {
        b->used += bytes;
        if (b->used > b->peak)
            b->peak = b->used;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int sl__membudget_charge(sl__membudget_t *b, int64_t bytes, const char *what,
                         char *err, size_t errlen)
{
    if (bytes <= 0)
        return 0;
    if (b->limit && bytes > b->limit) /* limit is set once, before threads */
        return too_big(b, bytes, what, err, errlen);
    pthread_mutex_lock(&b->mu);
    uint64_t me = b->ticket++;
    /* me < serving only after a stop let later tickets leave first. */
    while (!b->stopped &&
           (me > b->serving || (b->limit && b->used + bytes > b->limit)))
        pthread_cond_wait(&b->cv, &b->mu);
    /* Our turn is over either way: let the next one in line try. */
    b->serving++;
    int stopped = b->stopped;
    if (!stopped) {
        b->used += bytes;
        if (b->used > b->peak)
            b->peak = b->used;
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return stopped;
}

void sl__membudget_release(sl__membudget_t *b, int64_t bytes)
{
    if (bytes <= 0)
        return;
    pthread_mutex_lock(&b->mu);
    b->used -= bytes;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void sl__membudget_stop(sl__membudget_t *b, int stop)
{
    pthread_mutex_lock(&b->mu);
    b->stopped = stop;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int64_t sl__membudget_used(sl__membudget_t *b)
{
    pthread_mutex_lock(&b->mu);
    int64_t v = b->used;
    pthread_mutex_unlock(&b->mu);
    return v;
}

int64_t sl__membudget_peak(sl__membudget_t *b)
{
    pthread_mutex_lock(&b->mu);
    int64_t v = b->peak;
    pthread_mutex_unlock(&b->mu);
    return v;
}
