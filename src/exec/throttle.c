/* Emulated slow storage: per-read latency and a shared token bucket
 * (throttle.h says what each part stands for). */
#include "throttle.h"

#include <time.h>

#include "base/base.h"

void sl__throttle_init(sl__throttle_t *t, int64_t latency_us,
                       int64_t bytes_per_s)
{
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* as sl__now_ns */
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&t->latency_ns, latency_us * 1000);
    atomic_store(&t->rate, bytes_per_s);
    t->issued = 0;
    t->credit = bytes_per_s > 0 ? SL_THROTTLE_BURST(bytes_per_s) : 0;
    t->last_ns = sl__now_ns();
    t->stopping = 0;
}

void sl__throttle_destroy(sl__throttle_t *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

/* Brings credit up to now at the current rate, never more than a full
 * bucket ahead of what was reserved. Under mu. */
static void refill(sl__throttle_t *t, int64_t now)
{
    int64_t rate = atomic_load(&t->rate);
    if (rate > 0 && now > t->last_ns) {
        double cap = t->issued + SL_THROTTLE_BURST(rate);
        t->credit += (double)rate * (double)(now - t->last_ns) / 1e9;
        if (t->credit > cap)
            t->credit = cap;
    }
    t->last_ns = now;
}

void sl__throttle_set_latency(sl__throttle_t *t, int64_t latency_us)
{
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->latency_ns, latency_us * 1000);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void sl__throttle_set_rate(sl__throttle_t *t, int64_t bytes_per_s)
{
    pthread_mutex_lock(&t->mu);
    int64_t now = sl__now_ns();
    refill(t, now); /* the time so far counts at the old rate */
    if (atomic_load(&t->rate) == 0 && bytes_per_s > 0)
        t->credit = t->issued + SL_THROTTLE_BURST(bytes_per_s); /* full */
    else if (bytes_per_s == 0)
        t->credit = t->issued; /* every waiter is released */
    atomic_store(&t->rate, bytes_per_s);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

int64_t sl__throttle_latency_us(sl__throttle_t *t)
{
    return atomic_load(&t->latency_ns) / 1000;
}

int64_t sl__throttle_rate(sl__throttle_t *t)
{
    return atomic_load(&t->rate);
}

static void wait_until(sl__throttle_t *t, int64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000),
                          (long)(deadline_ns % 1000000000)};
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

void sl__throttle_wait(sl__throttle_t *t, uint64_t bytes, int64_t t0_ns)
{
    if (atomic_load(&t->latency_ns) == 0 && atomic_load(&t->rate) == 0)
        return; /* off: no lock on the common path */
    pthread_mutex_lock(&t->mu);
    /* Latency: until t0 + L, L as it stands at each wake-up. */
    for (;;) {
        int64_t end = t0_ns + atomic_load(&t->latency_ns);
        if (t->stopping || sl__now_ns() >= end)
            break;
        wait_until(t, end);
    }
    /* Bandwidth: reserve the bytes, then wait until the bucket has let
     * everything up to and including them through. Readers are served in
     * the order they reserved. */
    int64_t now = sl__now_ns();
    refill(t, now);
    if (atomic_load(&t->rate) > 0 && !t->stopping) {
        t->issued += (double)bytes;
        double ticket = t->issued;
        for (;;) {
            int64_t rate = atomic_load(&t->rate);
            if (t->stopping || rate == 0 || t->credit >= ticket)
                break;
            double need_ns = (ticket - t->credit) / (double)rate * 1e9;
            wait_until(t, now + (int64_t)need_ns + 1);
            now = sl__now_ns();
            refill(t, now);
        }
    }
    pthread_mutex_unlock(&t->mu);
}

void sl__throttle_stop(sl__throttle_t *t, int on)
{
    pthread_mutex_lock(&t->mu);
    t->stopping = on;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}
