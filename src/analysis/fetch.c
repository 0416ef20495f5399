/* The fetch side of the analysis: the dataset's files, their eviction from
 * the page cache, and a pass reading every sample's stored bytes. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "base/alloc.h"
#include "telemetry/machine.h"

#define FETCH_MAX_THREADS 4

int sl__dataset_files_list(const sl__source_t *src, sl__dataset_files_t *f)
{
    memset(f, 0, sizeof *f);
    int64_t n = sl__source_file_count(src);
    f->path = calloc(n > 0 ? (size_t)n : 1, sizeof *f->path);
    if (!f->path)
        return SL_ENOMEM;
    char buf[4608];
    for (int64_t k = 0; k < n; k++) {
        const char *p = sl__source_file_path(src, k, buf, sizeof buf);
        if (!p)
            continue; /* a path longer than any the OS opens */
        if (!(f->path[f->n] = strdup(p)))
            return SL_ENOMEM;
        struct stat st;
        if (stat(p, &st) == 0)
            f->bytes += (double)st.st_size;
        f->n++;
    }
    return 0;
}

void sl__dataset_files_free(sl__dataset_files_t *f)
{
    sl__strv_free(f->path, f->n);
    memset(f, 0, sizeof *f);
}

int64_t sl__dataset_files_evict(const sl__dataset_files_t *f)
{
    int64_t failed = 0;
    for (int64_t i = 0; i < f->n; i++) {
        int fd = sl__open_regular(f->path[i], NULL, NULL, 0); /* no wait */
        if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
            failed++;
        if (fd >= 0)
            close(fd);
    }
    return failed;
}

double sl__mem_available(void)
{
    char buf[16384];
    uint64_t total, avail;
    long n = sl__read_small("/", "proc/meminfo", buf, sizeof buf);
    if (n < 0 || sl__parse_meminfo(buf, (size_t)n, &total, &avail))
        return -1;
    return (double)avail;
}

typedef struct fetch_ctx {
    const sl__source_t *src;
    atomic_llong next;
    atomic_llong samples, stored;
    atomic_int err;
    int64_t deadline_ns;
    char msg[512];
    pthread_mutex_t mu; /* msg: the first error's, written once */
} fetch_ctx_t;

static void *fetch_worker(void *arg)
{
    fetch_ctx_t *c = arg;
    sl__bytes_t out = {0}, scratch = {0};
    char err[512];
    int64_t n = sl__source_count(c->src);
    for (;;) {
        long long i = atomic_fetch_add(&c->next, 1);
        if (i >= n || atomic_load(&c->err) || sl__now_ns() > c->deadline_ns)
            break;
        uint64_t stored = 0;
        int rc = sl__source_read(c->src, i, &out, &scratch, &stored, err,
                                 sizeof err);
        if (rc) {
            pthread_mutex_lock(&c->mu);
            if (!atomic_load(&c->err)) {
                snprintf(c->msg, sizeof c->msg, "%s", err);
                atomic_store(&c->err, rc);
            }
            pthread_mutex_unlock(&c->mu);
            break;
        }
        atomic_fetch_add(&c->samples, 1);
        atomic_fetch_add(&c->stored, (long long)stored);
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    return NULL;
}

int sl__fetch_pass(const sl__source_t *src, int threads, double max_s,
                   sl__fetch_result_t *out, char *err, size_t errlen)
{
    fetch_ctx_t c;
    memset(&c, 0, sizeof c);
    c.src = src;
    pthread_mutex_init(&c.mu, NULL);
    pthread_t th[FETCH_MAX_THREADS];
    int started = 0;
    int64_t t0 = sl__now_ns();
    c.deadline_ns = t0 + (int64_t)(max_s * 1e9);
    for (int i = 0; i < threads && i < FETCH_MAX_THREADS; i++)
        if (pthread_create(&th[i], NULL, fetch_worker, &c) == 0)
            started++;
    if (!started)
        fetch_worker(&c);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    out->secs = (double)(sl__now_ns() - t0) / 1e9;
    out->samples = atomic_load(&c.samples);
    out->stored = atomic_load(&c.stored);
    int rc = atomic_load(&c.err);
    pthread_mutex_destroy(&c.mu);
    return rc ? sl__fail(err, errlen, rc, "fetch: %s", c.msg) : 0;
}
