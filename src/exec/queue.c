#include "queue.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/base.h"

struct sl__queue {
    pthread_mutex_t mu;
    pthread_cond_t not_full;
    pthread_cond_t not_empty;
    void **ring;
    size_t cap, head, len;
    int closed;
};

sl__queue_t *sl__queue_create(size_t capacity)
{
    if (capacity < 1)
        capacity = 1;
    sl__queue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->ring = calloc(capacity, sizeof(void *));
    if (!q->ring) {
        free(q);
        return NULL;
    }
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_full, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    return q;
}

void sl__queue_destroy(sl__queue_t *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_full);
    pthread_cond_destroy(&q->not_empty);
    free(q->ring);
    free(q);
}

static int push(sl__queue_t *q, void *item, int block)
{
    pthread_mutex_lock(&q->mu);
    while (block && q->len == q->cap && !q->closed)
        pthread_cond_wait(&q->not_full, &q->mu);
    if (!q->closed && q->len == q->cap) {
        pthread_mutex_unlock(&q->mu);
        return 1;
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return SL_ESTATE;
    }
    q->ring[(q->head + q->len) % q->cap] = item;
    q->len++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int sl__queue_push(sl__queue_t *q, void *item)
{
    return push(q, item, 1);
}

int sl__queue_try_push(sl__queue_t *q, void *item)
{
    return push(q, item, 0);
}

static void *take(sl__queue_t *q)
{
    void *item = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    pthread_cond_signal(&q->not_full);
    return item;
}

static void *take_newest(sl__queue_t *q)
{
    void *item = q->ring[(q->head + q->len - 1) % q->cap];
    q->len--;
    pthread_cond_signal(&q->not_full);
    return item;
}

static int pop(sl__queue_t *q, void **item, void *(*from)(sl__queue_t *))
{
    pthread_mutex_lock(&q->mu);
    while (q->len == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->mu);
    if (q->len == 0) {
        pthread_mutex_unlock(&q->mu);
        return SL_EEND;
    }
    *item = from(q);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int sl__queue_pop(sl__queue_t *q, void **item)
{
    return pop(q, item, take);
}

int sl__queue_pop_newest(sl__queue_t *q, void **item)
{
    return pop(q, item, take_newest);
}

static int try_pop(sl__queue_t *q, void **item, void *(*from)(sl__queue_t *))
{
    pthread_mutex_lock(&q->mu);
    if (q->len == 0) {
        pthread_mutex_unlock(&q->mu);
        return SL_EEND;
    }
    *item = from(q);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int sl__queue_try_pop(sl__queue_t *q, void **item)
{
    return try_pop(q, item, take);
}

int sl__queue_try_pop_newest(sl__queue_t *q, void **item)
{
    return try_pop(q, item, take_newest);
}

void sl__queue_close(sl__queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_full);
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

void sl__queue_reopen(sl__queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 0;
    pthread_mutex_unlock(&q->mu);
}

size_t sl__queue_len(sl__queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t sl__queue_capacity(sl__queue_t *q)
{
    return q->cap;
}
