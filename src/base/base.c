#include "base.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int64_t sl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec sl__mono_timespec(int64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000),
                             (long)(ns % 1000000000)};
}

int sl__fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int sl__bytes_reserve(sl__bytes_t *b, size_t want)
{
    if (want <= b->cap)
        return 0;
    if (want > SIZE_MAX / 2) /* doubling past it would wrap to 0 */
        return SL_ENOMEM;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < want)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return SL_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

void sl__bytes_free(sl__bytes_t *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int sl__ncpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void sl__sbuf_printf(sl__sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = b->buf && b->len < b->cap ? b->buf + b->len : NULL;
    int n = vsnprintf(dst, dst ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        b->need += n;
        b->len += (size_t)n;
    }
}
