/* base/fdcache under threads (the text loader's workers share one): many
 * readers through a cache of SL__FDCACHE_MAX slots over more files than
 * that, every read's bytes checked, so a descriptor closed, evicted or
 * handed to two files at once shows as wrong bytes or EBADF here, and as
 * a race under ThreadSanitizer (make check runs this under TSan too). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fdcache.h"
#include "testutil.h"

#define NFILES (3 * SL__FDCACHE_MAX) /* more files than slots */
#define FILE_BYTES 4096
#define NTHREADS 8
#define ROUNDS 5000

typedef struct fixture {
    char *dir;
    char path[NFILES][512];
    sl__fdcache_t cache;
} fixture_t;

/* Byte i of file f: a function of both, so a read through another file's
 * descriptor (a slot reused under a reader) never matches. */
static unsigned char byte_of(int f, int i)
{
    return (unsigned char)(f * 131 + i * 7 + (i >> 8));
}

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    fx->dir = tu_tmpdir("fdcache");
    unsigned char buf[FILE_BYTES];
    for (int f = 0; f < NFILES; f++) {
        for (int i = 0; i < FILE_BYTES; i++)
            buf[i] = byte_of(f, i);
        snprintf(fx->path[f], sizeof fx->path[f], "%s/f%03d", fx->dir, f);
        tu_write_file(fx->path[f], buf, sizeof buf);
    }
    sl__fdcache_init(&fx->cache);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    sl__fdcache_free(&fx->cache);
    tu_rmtree(fx->dir);
    free(fx->dir);
    free(fx);
    return 0;
}

/* One piece of file f read through the cache and checked: 0, or a
 * message's worth of why in err. */
static int read_checked(fixture_t *fx, int f, unsigned seed, char *err,
                        size_t errlen)
{
    int fd = sl__fdcache_get(&fx->cache, f, fx->path[f], err, errlen);
    if (fd < 0)
        return -1;
    int off = (int)(seed % (FILE_BYTES - 64)), len = 1 + (int)(seed % 63);
    unsigned char got[64];
    ssize_t k = pread(fd, got, (size_t)len, off);
    int bad = k != len;
    for (int i = 0; !bad && i < len; i++)
        bad = got[i] != byte_of(f, off + i);
    if (bad)
        snprintf(err, errlen, "file %d at %d: %s", f, off,
                 k < 0 ? strerror(errno) : "wrong bytes");
    sl__fdcache_put(&fx->cache, fd);
    return bad ? -1 : 0;
}

typedef struct worker {
    fixture_t *fx;
    int id, failed;
    char err[512];
} worker_t;

static void *reader(void *arg)
{
    worker_t *w = arg;
    unsigned s = 2463534242u + (unsigned)w->id * 7919u; /* xorshift32 */
    for (int r = 0; r < ROUNDS && !w->failed; r++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        /* half the reads in a few hot files, half anywhere: hits, misses
         * and evictions all at once */
        int f = (s & 1) ? (int)(s >> 1) % 4 : (int)(s >> 1) % NFILES;
        if (read_checked(w->fx, f, s >> 3, w->err, sizeof w->err))
            w->failed = 1;
    }
    return NULL;
}

/* Readers at once over three times as many files as slots: every read
 * gets its own file's bytes. */
static void test_threads_read_through_the_cache(void **state)
{
    fixture_t *fx = *state;
    pthread_t t[NTHREADS];
    worker_t w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker_t){.fx = fx, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, reader, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failed)
            fail_msg("reader %d: %s", i, w[i].err);
    }
    assert_true(fx->cache.n <= SL__FDCACHE_MAX);
    for (int i = 0; i < fx->cache.n; i++)
        assert_int_equal(fx->cache.ent[i].refs, 0); /* all given back */
}

/* A file held by one thread while others cycle every file through the
 * cache (evicting everything idle, many times over): the held descriptor
 * stays open and its file's, and reads of the same file meanwhile share
 * it or get their own. */
typedef struct holder {
    fixture_t *fx;
    int fd;
    pthread_mutex_t mu;
    int stop, failed;
    char err[512];
} holder_t;

static void *hold_and_read(void *arg)
{
    holder_t *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop && !h->failed) {
        unsigned char got[16];
        pthread_mutex_unlock(&h->mu);
        ssize_t k = pread(h->fd, got, sizeof got, 100);
        int bad = k != (ssize_t)sizeof got;
        for (int i = 0; !bad && i < (int)sizeof got; i++)
            bad = got[i] != byte_of(0, 100 + i);
        pthread_mutex_lock(&h->mu);
        if (bad) {
            snprintf(h->err, sizeof h->err, "held file 0: %s",
                     k < 0 ? strerror(errno) : "wrong bytes");
            h->failed = 1;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void *cycle_files(void *arg)
{
    worker_t *w = arg;
    for (int r = 0; r < 6 && !w->failed; r++)
        for (int f = 0; f < NFILES && !w->failed; f++)
            if (read_checked(w->fx, (f + w->id * 5) % NFILES,
                             (unsigned)(r * 977 + f), w->err, sizeof w->err))
                w->failed = 1;
    return NULL;
}

static void test_eviction_while_a_file_is_held(void **state)
{
    fixture_t *fx = *state;
    char err[512] = "";
    holder_t h = {.fx = fx};
    pthread_mutex_init(&h.mu, NULL);
    h.fd = sl__fdcache_get(&fx->cache, 0, fx->path[0], err, sizeof err);
    assert_true(h.fd >= 0);
    pthread_t th, t[4];
    worker_t w[4];
    assert_int_equal(pthread_create(&th, NULL, hold_and_read, &h), 0);
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){.fx = fx, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, cycle_files, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failed)
            fail_msg("cycler %d: %s", i, w[i].err);
    }
    pthread_mutex_lock(&h.mu);
    h.stop = 1;
    pthread_mutex_unlock(&h.mu);
    pthread_join(th, NULL);
    if (h.failed)
        fail_msg("%s", h.err);
    /* still file 0's after every other file went through the cache */
    unsigned char b;
    assert_int_equal(pread(h.fd, &b, 1, 7), 1);
    assert_int_equal(b, byte_of(0, 7));
    sl__fdcache_put(&fx->cache, h.fd);
    for (int i = 0; i < fx->cache.n; i++)
        assert_int_equal(fx->cache.ent[i].refs, 0);
    pthread_mutex_destroy(&h.mu);
}

/* Every slot held: the next reader gets a descriptor of its own (no
 * wait), its file's, closed when given back. */
static void test_all_slots_busy_gives_an_own_descriptor(void **state)
{
    fixture_t *fx = *state;
    char err[512] = "";
    int held[SL__FDCACHE_MAX];
    for (int f = 0; f < SL__FDCACHE_MAX; f++) {
        held[f] = sl__fdcache_get(&fx->cache, f, fx->path[f], err, sizeof err);
        assert_true(held[f] >= 0);
    }
    int f = SL__FDCACHE_MAX + 1;
    int own = sl__fdcache_get(&fx->cache, f, fx->path[f], err, sizeof err);
    assert_true(own >= 0);
    unsigned char b;
    assert_int_equal(pread(own, &b, 1, 9), 1);
    assert_int_equal(b, byte_of(f, 9));
    sl__fdcache_put(&fx->cache, own);
    /* closed by put (nothing else opens meanwhile: one thread here) */
    assert_int_equal(fcntl(own, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
    for (int i = 0; i < SL__FDCACHE_MAX; i++)
        sl__fdcache_put(&fx->cache, held[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_threads_read_through_the_cache,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_while_a_file_is_held,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_all_slots_busy_gives_an_own_descriptor, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
