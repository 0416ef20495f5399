#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct worker_arg {
    sl__workers_t *pool;
    int id;
} worker_arg_t;

struct sl__workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sl__worker_fn fn;
    void *arg;
    int target;  /* threads that should work */
    int started; /* threads started (ids 0..started-1) */
    int stopping;
    int fail_errno, fail_id, fail_want; /* the last pthread_create refused */
    pthread_t tid[SL_WORKERS_MAX];
    worker_arg_t args[SL_WORKERS_MAX];
};

static void *thread_main(void *p)
{
    worker_arg_t *a = p;
    a->pool->fn(a->pool->arg, a->id);
    return NULL;
}

sl__workers_t *sl__workers_create(sl__worker_fn fn, void *arg)
{
    sl__workers_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->fn = fn;
    w->arg = arg;
    return w;
}

int sl__workers_set(sl__workers_t *w, int n)
{
    if (n < 0 || n > SL_WORKERS_MAX)
        return SL_ERANGE;
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    w->target = n;
    while (!w->stopping && w->started < n) {
        int id = w->started;
        w->args[id].pool = w;
        w->args[id].id = id;
        int e = pthread_create(&w->tid[id], NULL, thread_main, &w->args[id]);
        if (e) {
            w->fail_errno = e;
            w->fail_id = id;
            w->fail_want = n;
            w->target = w->started;
            rc = SL_ETHREAD;
            break;
        }
        w->started++;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int sl__workers_target(sl__workers_t *w)
{
    pthread_mutex_lock(&w->mu);
    int n = w->target;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int sl__workers_checkpoint(sl__workers_t *w, int id)
{
    pthread_mutex_lock(&w->mu);
    while (!w->stopping && id >= w->target)
        pthread_cond_wait(&w->cv, &w->mu);
    int go = !w->stopping;
    pthread_mutex_unlock(&w->mu);
    return go;
}

void sl__workers_stop(sl__workers_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void sl__workers_join(sl__workers_t *w)
{
    /* `started` only grows while not stopping, so it is stable here. */
    pthread_mutex_lock(&w->mu);
    int n = w->started;
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < n; i++)
        pthread_join(w->tid[i], NULL);
}

void sl__workers_reset(sl__workers_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->started = 0;
    w->stopping = 0;
    pthread_mutex_unlock(&w->mu);
}

void sl__workers_destroy(sl__workers_t *w)
{
    if (!w)
        return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

void sl__workers_why(sl__workers_t *w, char *buf, size_t len)
{
    pthread_mutex_lock(&w->mu);
    if (w->fail_errno)
        snprintf(buf, len, "thread %d of %d: %s%s", w->fail_id + 1,
                 w->fail_want, strerror(w->fail_errno),
                 w->fail_errno == EAGAIN
                     ? " (a limit on threads, or on address space for their "
                       "stacks: ulimit -u, ulimit -v)"
                     : "");
    else
        snprintf(buf, len, "no failure");
    pthread_mutex_unlock(&w->mu);
}
