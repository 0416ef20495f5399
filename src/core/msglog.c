#include "core/msglog.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void sl__msglog_init(sl__msglog_t *g, int keep)
{
    pthread_mutex_init(&g->mu, NULL);
    g->msg = NULL;
    g->count = g->kept = g->cap = 0;
    g->keep = keep;
}

void sl__msglog_free(sl__msglog_t *g)
{
    for (int64_t i = 0; i < g->kept; i++)
        free(g->msg[i]);
    free(g->msg);
    g->msg = NULL;
    g->count = g->kept = g->cap = 0;
    pthread_mutex_destroy(&g->mu);
}

void sl__msglog_add(sl__msglog_t *g, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    pthread_mutex_lock(&g->mu);
    g->count++;
    if (s && g->kept < g->keep) {
        if (g->kept == g->cap) {
            int64_t cap = g->cap ? 2 * g->cap : 64;
            char **v = realloc(g->msg, (size_t)cap * sizeof *v);
            if (v)
                g->msg = v, g->cap = cap;
        }
        if (g->kept < g->cap) {
            g->msg[g->kept++] = s;
            s = NULL;
        }
    }
    pthread_mutex_unlock(&g->mu);
    free(s);
}

int64_t sl__msglog_count(sl__msglog_t *g)
{
    pthread_mutex_lock(&g->mu);
    int64_t n = g->count;
    pthread_mutex_unlock(&g->mu);
    return n;
}

const char *sl__msglog_get(sl__msglog_t *g, int64_t i)
{
    pthread_mutex_lock(&g->mu);
    const char *s = i >= 0 && i < g->kept ? g->msg[i] : NULL;
    pthread_mutex_unlock(&g->mu);
    return s;
}
