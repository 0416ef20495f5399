/* cache/disk_tier: entries in one file of a fresh subdirectory, the index
 * in memory. See disk_tier.h. */
#include "cache/disk_tier.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRIES "entries"

enum { ABSENT = 0, WRITING, READY, DROPPED };

typedef struct slot {
    int64_t off;
    uint32_t n;
    uint32_t state;
} slot_t;

struct sl__dtier {
    pthread_mutex_t mu;
    int fd;
    int64_t nkeys;
    char *dir;  /* the subdirectory made */
    char *file; /* dir/entries */
    slot_t *index;
    sl__dtier_stats_t st;
    char why[512]; /* the first failed write */
};

int sl__dtier_create(const char *dir, int64_t nkeys, int64_t limit,
                     sl__dtier_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!dir || !*dir || limit <= 0 || nkeys < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "cache_dir %s with %lld bytes: both are needed",
                        dir && *dir ? dir : "(none)", (long long)limit);
    struct stat sb;
    if (stat(dir, &sb))
        return sl__fail(err, errlen, SL_EIO, "cache_dir %s: %s", dir,
                        strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return sl__fail(err, errlen, SL_EIO, "cache_dir %s: not a directory",
                        dir);
    sl__dtier_t *d = calloc(1, sizeof *d);
    size_t len = strlen(dir) + 32;
    if (d) {
        d->dir = malloc(len);
        d->file = malloc(len + sizeof ENTRIES);
    }
    if (!d || !d->dir || !d->file) {
        if (d) {
            free(d->dir);
            free(d->file);
        }
        free(d);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    snprintf(d->dir, len, "%s/sluice-cache-XXXXXX", dir);
    if (!mkdtemp(d->dir)) {
        int e = errno;
        free(d->dir);
        free(d->file);
        free(d);
        return sl__fail(err, errlen, SL_EIO,
                        "cache_dir %s: cannot make a directory in it: %s", dir,
                        strerror(e));
    }
    snprintf(d->file, len + sizeof ENTRIES, "%s/" ENTRIES, d->dir);
    d->fd = open(d->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (d->fd < 0) {
        int e = errno;
        rmdir(d->dir);
        free(d->dir);
        free(d->file);
        free(d);
        return sl__fail(err, errlen, SL_EIO,
                        "cache_dir %s: cannot write in it: %s", dir,
                        strerror(e));
    }
    pthread_mutex_init(&d->mu, NULL);
    d->nkeys = nkeys;
    d->st.limit = limit;
    d->st.admitting = 1;
    *out = d;
    return 0;
}

void sl__dtier_destroy(sl__dtier_t *d)
{
    if (!d)
        return;
    close(d->fd);
    unlink(d->file);
    rmdir(d->dir);
    pthread_mutex_destroy(&d->mu);
    free(d->index);
    free(d->dir);
    free(d->file);
    free(d);
}

const char *sl__dtier_path(const sl__dtier_t *d)
{
    return d->dir;
}

int sl__dtier_find(sl__dtier_t *d, int64_t key, size_t *n)
{
    pthread_mutex_lock(&d->mu);
    const slot_t *s =
        d->index && key >= 0 && key < d->nkeys ? &d->index[key] : NULL;
    int hit = s && s->state == READY;
    if (hit)
        *n = s->n; /* a hit once read (sl__dtier_read) */
    else
        d->st.misses++;
    pthread_mutex_unlock(&d->mu);
    return hit;
}

/* All n bytes at off, or -1 with errno (EIO for an early end of file). */
static int read_all(int fd, void *dst, size_t n, int64_t off)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)off + got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = EIO;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n, int64_t off)
{
    for (size_t put = 0; put < n;) {
        ssize_t r =
            pwrite(fd, (const char *)p + put, n - put, (off_t)off + put);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ENOSPC;
            return -1;
        }
        put += (size_t)r;
    }
    return 0;
}

int sl__dtier_read(sl__dtier_t *d, int64_t key, void *dst, size_t n, char *err,
                   size_t errlen)
{
    pthread_mutex_lock(&d->mu);
    slot_t s =
        key >= 0 && key < d->nkeys && d->index ? d->index[key] : (slot_t){0};
    pthread_mutex_unlock(&d->mu);
    int e = EINVAL, rc = -1;
    if (s.state == READY && s.n == n) {
        rc = read_all(d->fd, dst, n, s.off);
        e = errno;
    }
    pthread_mutex_lock(&d->mu);
    if (!rc) {
        d->st.hits++;
    } else {
        if (s.state == READY && d->index[key].state == READY) {
            d->index[key].state = DROPPED;
            d->st.entries--;
        }
        d->st.errors++;
        d->st.misses++;
    }
    pthread_mutex_unlock(&d->mu);
    if (!rc)
        return 0;
    return sl__fail(err, errlen, SL_EIO,
                    "cache %s: reading sample %lld (%zu bytes): %s", d->file,
                    (long long)key, n, strerror(e));
}

void sl__dtier_count_miss(sl__dtier_t *d)
{
    pthread_mutex_lock(&d->mu);
    d->st.misses++;
    pthread_mutex_unlock(&d->mu);
}

/* Under mu: the index exists (made at the first put). */
static int have_index(sl__dtier_t *d)
{
    if (!d->index && d->nkeys > 0)
        d->index = calloc((size_t)d->nkeys, sizeof *d->index);
    return d->index != NULL;
}

int sl__dtier_wants(sl__dtier_t *d, size_t n)
{
    pthread_mutex_lock(&d->mu);
    int yes = d->st.admitting && d->st.bytes + (int64_t)n <= d->st.limit;
    pthread_mutex_unlock(&d->mu);
    return yes;
}

int sl__dtier_put(sl__dtier_t *d, int64_t key, const void *p, size_t n)
{
    if (key < 0 || key >= d->nkeys || n > UINT32_MAX)
        return 0;
    pthread_mutex_lock(&d->mu);
    int ok = d->st.admitting && d->st.bytes + (int64_t)n <= d->st.limit &&
             have_index(d) && d->index[key].state == ABSENT;
    int64_t off = d->st.bytes;
    if (ok) {
        d->index[key] = (slot_t){off, (uint32_t)n, WRITING};
        d->st.bytes += (int64_t)n; /* reserved: no other put writes there */
    } else {
        d->st.rejects++;
    }
    pthread_mutex_unlock(&d->mu);
    if (!ok)
        return 0;
    int rc = write_all(d->fd, p, n, off);
    int e = errno;
    pthread_mutex_lock(&d->mu);
    int first = 0;
    if (!rc) {
        d->index[key].state = READY;
        d->st.entries++;
        d->st.inserts++;
    } else {
        d->index[key].state = ABSENT;
        d->st.rejects++;
        /* Only the failure that stops admitting is an error: a write that
         * was already under way then (another decode thread's, into the
         * same full disk) and fails too is that same event, counted in
         * late_write_errors. So errors does not depend on how many threads
         * were writing when the disk filled. */
        first = d->st.admitting;
        d->st.admitting = 0;
        if (first)
            d->st.errors++;
        else
            d->st.late_write_errors++;
        if (first)
            snprintf(d->why, sizeof d->why,
                     "cache %s: writing %zu bytes at %lld: %s: the disk tier "
                     "stops admitting (it keeps the %lld samples it holds)",
                     d->file, n, (long long)off, strerror(e),
                     (long long)d->st.entries);
    }
    pthread_mutex_unlock(&d->mu);
    return rc ? (first ? -1 : 0) : 1;
}

void sl__dtier_get_stats(sl__dtier_t *d, sl__dtier_stats_t *s)
{
    pthread_mutex_lock(&d->mu);
    *s = d->st;
    pthread_mutex_unlock(&d->mu);
}

void sl__dtier_error(sl__dtier_t *d, char *buf, size_t len)
{
    pthread_mutex_lock(&d->mu);
    snprintf(buf, len, "%s", d->why);
    pthread_mutex_unlock(&d->mu);
}
