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
    struct timespec ts = sl__mono_timespec(deadline_ns);
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

int64_t sl__throttle_due(sl__throttle_t *t, int64_t t0_ns)
{
    /* stopping is written under mu; a stale read only delays by one wait */
    return t0_ns + atomic_load(&t->latency_ns);
}

/* Under mu: the bytes join the line; their ticket (0: no cap). */
static double reserve(sl__throttle_t *t, uint64_t bytes, int64_t now)
{
    refill(t, now);
    if (atomic_load(&t->rate) <= 0 || t->stopping)
        return 0;
    t->issued += (double)bytes;
    return t->issued;
}

/* Under mu, credit brought up to `now`: ns until `ticket` is through (0:
 * through now). */
static int64_t left_ns(sl__throttle_t *t, double ticket)
{
    int64_t rate = atomic_load(&t->rate);
    if (t->stopping || rate == 0 || ticket <= 0 || t->credit >= ticket)
        return 0;
    return (int64_t)((ticket - t->credit) / (double)rate * 1e9) + 1;
}

double sl__throttle_reserve(sl__throttle_t *t, uint64_t bytes)
{
    if (atomic_load(&t->rate) == 0)
        return 0;
    pthread_mutex_lock(&t->mu);
    double ticket = reserve(t, bytes, sl__now_ns());
    pthread_mutex_unlock(&t->mu);
    return ticket;
}

int64_t sl__throttle_ready(sl__throttle_t *t, double ticket)
{
    if (ticket <= 0)
        return 0;
    pthread_mutex_lock(&t->mu);
    refill(t, sl__now_ns());
    int64_t left = left_ns(t, ticket);
    pthread_mutex_unlock(&t->mu);
    return left;
}

void sl__throttle_wait(sl__throttle_t *t, uint64_t bytes, int64_t t0_ns)
{
    if (atomic_load(&t->latency_ns) == 0 && atomic_load(&t->rate) == 0)
        return; /* off: no lock on the common path */
    pthread_mutex_lock(&t->mu);
    /* Latency: until t0 + L, L as it stands at each wake-up. */
    for (;;) {
        int64_t end = sl__throttle_due(t, t0_ns);
        if (t->stopping || sl__now_ns() >= end)
            break;
        wait_until(t, end);
    }
    /* Bandwidth: reserve the bytes, then wait until the bucket has let
     * everything up to and including them through. Readers are served in
     * the order they reserved. */
    double ticket = reserve(t, bytes, sl__now_ns());
    for (int64_t left; (left = left_ns(t, ticket)) > 0;) {
        wait_until(t, sl__now_ns() + left);
        refill(t, sl__now_ns());
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
