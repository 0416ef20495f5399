/* data/remote_multi: many ranged reads in flight from one thread, against
 * a small HTTP/1.1 server in this process (keep-alive, single ranges; of
 * /data, the first GET of a range at an offset divisible by 3 is a 500, /gone:
 * HEAD answers, GET always 500, /slow: the answer after 3 s).
 *   - threads x engines, each many reads in flight of one shared object:
 *     every byte right, every read back once, the 500s retried (the TSan
 *     stage runs this: the engines share the object and libcurl's global
 *     state);
 *   - a read that stays failed: the blocking path's message, word for
 *     word ("URL: bytes A-B: HTTP 500 (after 2 retries)"), and its code;
 *   - cancel ends the reads in flight at once, each handed back failed;
 *   - connections are reused (fewer connections than requests);
 *   - the loader on a zstd shard served at /shard.sls (its first GET at
 *     each offset divisible by 3 a 500): the stream of the local shard at
 *     io_depth off, 1, 8 and 64 (read path "curl multi"), and again while
 *     another thread flips io_depth and read threads across restarts,
 *     2 ms a request (stops cancel reads in flight; TSan);
 *   - WebDataset tars with sidecars served at /wds/NAME (404 when absent):
 *     a brace list of them opens (several threads at once, data/recset)
 *     to the index of the same files on disk; with two missing, the first
 *     in the list is the error every time, and under skip both are noted
 *     in order and the rest kept; four threads opening at once (TSan).
 * Skips without libcurl (SL_CURL=OFF). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "codec/codec.h"
#include "data/ext_out.h"
#include "data/recfile.h"
#include "data/recset.h"
#include "data/remote.h"
#include "data/remote_multi.h"
#include "data/shard.h"
#include "sluice/sluice.h"
#include "sluice/testing.h"
#include "testutil.h"

#define OBJ (1u << 20)
#define THREADS 4
#define READS 200
#define DEPTH 16

static int g_port, g_lfd;
static atomic_int g_gets, g_fails, g_conns;
static atomic_char g_seen[OBJ]; /* a range from here was asked before */
static char *g_root, *g_shard;  /* images, and the same in one shard */
static char *g_wds;             /* ... and as WebDataset tars, at /wds/ */
static uint8_t *g_file;         /* the shard's bytes, served at /shard.sls */
static size_t g_file_n;
static atomic_char g_fseen[OBJ];
static atomic_int g_file_delay_us; /* before each GET of /shard.sls */

static uint8_t byte_at(uint64_t i)
{
    return (uint8_t)(i * 7 + (i >> 9));
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The shard's record offsets (set up with it), for /lone.sls: a range
 * that holds the start of more than one record always answers 500. */
static uint64_t g_rec_off[128];
static int g_nrec, g_ntars;

static int records_in(unsigned long long a, unsigned long long b)
{
    int k = 0;
    for (int i = 0; i < g_nrec; i++)
        k += g_rec_off[i] >= a && g_rec_off[i] <= b;
    return k;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[4096];
    size_t have = 0;
    uint8_t *body = malloc(OBJ);
    for (;;) {
        char *end;
        while (!(end = memmem(req, have, "\r\n\r\n", 4))) {
            ssize_t k = recv(fd, req + have, sizeof req - 1 - have, 0);
            if (k <= 0)
                goto out;
            have += (size_t)k;
        }
        size_t used = (size_t)(end + 4 - req);
        req[used - 1] = 0;
        char method[8] = "", path[256] = "", hdr[256];
        sscanf(req, "%7s %255s", method, path);
        int lone = !strcmp(path, "/lone.sls");
        int file = !strcmp(path, "/shard.sls") || lone;
        uint8_t *tar = NULL; /* a file of g_wds, read for this request */
        size_t tar_n = 0;
        if (!strncmp(path, "/wds/", 5)) {
            char fp[4096];
            snprintf(fp, sizeof fp, "%s/%s", g_wds, path + 5);
            if (!(tar = tu_read_file(fp, &tar_n)) || tar_n >= OBJ) {
                free(tar);
                memmove(req, req + used, have - used);
                have -= used;
                int n = snprintf(hdr, sizeof hdr,
                                 "HTTP/1.1 404 Not Found\r\n"
                                 "Content-Length: 0\r\n\r\n");
                if (send_all(fd, hdr, (size_t)n))
                    goto out;
                continue;
            }
        }
        unsigned long long size = tar ? tar_n : file ? g_file_n : OBJ;
        unsigned long long a = 0, b = size - 1;
        const char *r = strstr(req, "Range: bytes=");
        int ranged = r && sscanf(r, "Range: bytes=%llu-%llu", &a, &b) == 2;
        memmove(req, req + used, have - used);
        have -= used;
        int head = !strcmp(method, "HEAD"), fail = 0;
        if (!head) {
            atomic_fetch_add(&g_gets, 1);
            fail = (lone && ranged && records_in(a, b) > 1) ||
                   !strcmp(path, "/gone") ||
                   (!strcmp(path, "/data") && ranged && a < OBJ && a % 3 == 0 &&
                    !atomic_exchange(&g_seen[a], 1)) ||
                   (file && ranged && a < OBJ && a % 3 == 0 &&
                    !atomic_exchange(&g_fseen[a], 1));
            if (!strcmp(path, "/slow"))
                sleep(3);
            if (file && atomic_load(&g_file_delay_us))
                usleep((useconds_t)atomic_load(&g_file_delay_us));
        }
        if (fail) {
            atomic_fetch_add(&g_fails, 1);
            int n = snprintf(hdr, sizeof hdr,
                             "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n");
            if (send_all(fd, hdr, (size_t)n))
                goto out;
            continue;
        }
        if (b >= size)
            b = size - 1;
        size_t n = head ? 0 : (size_t)(b - a + 1);
        int hn =
            ranged && !head
                ? snprintf(hdr, sizeof hdr,
                           "HTTP/1.1 206 Partial\r\nContent-Length: %zu\r\n"
                           "Content-Range: bytes %llu-%llu/%llu\r\n\r\n",
                           n, a, b, size)
                : snprintf(hdr, sizeof hdr,
                           "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n\r\n",
                           size);
        for (size_t i = 0; i < n; i++)
            body[i] = tar ? tar[a + i] : file ? g_file[a + i] : byte_at(a + i);
        free(tar);
        if (send_all(fd, hdr, (size_t)hn) || send_all(fd, body, n))
            goto out;
    }
out:
    free(body);
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(g_lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        atomic_fetch_add(&g_conns, 1);
        /* Header and body are two sends: without this, Nagle and a
         * delayed ACK add 40 ms to each answer. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
}

static int setup(void **state)
{
    (void)state;
    setenv("SL_HTTP_RETRIES", "2", 1); /* read once, at the first request */
    setenv("SL_HTTP_BACKOFF_MS", "5", 1);
    sl__rmulti_t *m;
    char err[256];
    if (sl__rmulti_open(&m, err, sizeof err)) {
        printf("# skipped: %s\n", err);
        exit(77);
    }
    sl__rmulti_close(m);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    g_lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (g_lfd < 0 || bind(g_lfd, (struct sockaddr *)&sa, sizeof sa) ||
        listen(g_lfd, 128) || getsockname(g_lfd, (struct sockaddr *)&sa, &sl))
        return -1;
    g_port = ntohs(sa.sin_port);
    g_root = tu_jpeg_tree("rmulti", 3, 24, 40, 30);
    char p[4096];
    snprintf(p, sizeof p, "%s.sls", g_root);
    g_shard = strdup(p);
    sl__shard_writer_t *w;
    if (sl__shard_writer_open(g_shard, SL_CODEC_ZSTD, &w, NULL, 0))
        return -1;
    /* The same images as WebDataset tars with sidecars, a few per tar. */
    snprintf(p, sizeof p, "%s-wds", g_root);
    g_wds = strdup(p);
    sl__ext_out_t o = {.dir = g_wds, .fmt = SL__FMT_WDS, .shard_size = 12000};
    if (sl__ext_out_begin(&o, NULL, 0))
        return -1;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 24; i++) {
            snprintf(p, sizeof p, "%s/c%d/i%02d.jpg", g_root, c, i);
            size_t n;
            uint8_t *b = tu_read_file(p, &n);
            if (!b ||
                sl__shard_writer_add(w, b, n, c, p + strlen(g_root) + 1, NULL,
                                     0) ||
                sl__ext_out_add(&o, b, n, c, p, NULL, 0))
                return -1;
            free(b);
        }
    if (sl__ext_out_commit(&o, NULL, 0) || o.files < 6)
        return -1;
    g_ntars = (int)o.files;
    if (sl__shard_writer_finish(w, NULL, 0) ||
        !(g_file = tu_read_file(g_shard, &g_file_n)) || g_file_n >= OBJ)
        return -1;
    sl__shard_t *sh;
    if (sl__shard_open(g_shard, &sh, NULL, 0))
        return -1;
    g_nrec = (int)sl__shard_count(sh);
    for (int i = 0; i < g_nrec && i < 128; i++)
        g_rec_off[i] = sl__shard_entry(sh, (uint64_t)i)->offset;
    sl__shard_close(sh);
    pthread_t t;
    if (pthread_create(&t, NULL, accept_main, NULL))
        return -1;
    pthread_detach(t);
    return 0;
}

static sl__remote_t *open_url(const char *path, uint64_t *size)
{
    char url[128], err[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g_port, path);
    sl__remote_t *r = NULL;
    int rc = sl__remote_open(url, &r, size, err, sizeof err);
    if (rc)
        printf("# %s\n", err);
    assert_int_equal(rc, 0);
    return r;
}

typedef struct {
    sl__remote_t *r;
    int seed, bad;
} job_t;

typedef struct {
    uint8_t *buf;
    uint64_t off;
    size_t len;
    int back;
    char err[512];
} rd_t;

/* READS reads of one thread, DEPTH at a time; bad counts wrong ones. */
static void *reader(void *arg)
{
    job_t *j = arg;
    sl__rmulti_t *m;
    char err[256];
    if (sl__rmulti_open(&m, err, sizeof err)) {
        j->bad = READS;
        return NULL;
    }
    rd_t *rd = calloc(READS, sizeof *rd);
    unsigned s = (unsigned)j->seed * 2654435761u + 1;
    int started = 0, back = 0;
    while (back < READS) {
        while (started < READS && sl__rmulti_pending(m) < DEPTH) {
            rd_t *x = &rd[started++];
            s = s * 1103515245u + 12345u;
            x->len = 1 + (s >> 8) % 65536;
            x->off = (s >> 4) % (OBJ - x->len);
            x->buf = malloc(x->len);
            if (sl__rmulti_read(m, j->r, x->off, x->buf, x->len, x, x->err,
                                sizeof x->err))
                j->bad++;
        }
        void *user;
        int rc;
        if (!sl__rmulti_complete(m, &user, &rc, 100000000))
            continue;
        rd_t *x = user;
        back++;
        if (rc || x->back++) {
            printf("# read %llu+%zu: rc %d %s\n", (unsigned long long)x->off,
                   x->len, rc, x->err);
            j->bad++;
            continue;
        }
        for (size_t i = 0; i < x->len; i++)
            if (x->buf[i] != byte_at(x->off + i)) {
                j->bad++;
                break;
            }
    }
    if (sl__rmulti_pending(m) != 0)
        j->bad++;
    for (int i = 0; i < READS; i++)
        free(rd[i].buf);
    free(rd);
    sl__rmulti_close(m);
    return NULL;
}

static void test_many_threads(void **state)
{
    (void)state;
    tu_watchdog(120, 0, "remote_multi: many threads");
    uint64_t size;
    sl__remote_t *r = open_url("/data", &size);
    assert_int_equal(size, OBJ);
    int fails0 = atomic_load(&g_fails), gets0 = atomic_load(&g_gets),
        conns0 = atomic_load(&g_conns);
    pthread_t t[THREADS];
    job_t j[THREADS];
    for (int i = 0; i < THREADS; i++) {
        j[i] = (job_t){r, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, reader, &j[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(j[i].bad, 0);
    }
    int fails = atomic_load(&g_fails) - fails0;
    int gets = atomic_load(&g_gets) - gets0;
    int conns = atomic_load(&g_conns) - conns0;
    printf("# %d reads: %d GETs, %d answered 500 (retried), %d connections\n",
           THREADS * READS, gets, fails, conns);
    assert_true(fails > 0);
    assert_int_equal(gets, THREADS * READS + fails);
    assert_true(conns < gets / 2); /* kept and reused */
    sl__remote_close(r);
    tu_watchdog(0, 0, NULL);
}

/* The same failed read on both paths: the same message and code. */
static void test_failure_message(void **state)
{
    (void)state;
    uint64_t size;
    sl__remote_t *r = open_url("/gone", &size);
    char want[512], got[512] = "", err[256];
    int wrc = sl__remote_read(r, 100, (uint8_t[50]){0}, 50, want, sizeof want);
    sl__rmulti_t *m;
    assert_int_equal(sl__rmulti_open(&m, err, sizeof err), 0);
    uint8_t buf[50];
    assert_int_equal(
        sl__rmulti_read(m, r, 100, buf, sizeof buf, buf, got, sizeof got), 0);
    void *user = NULL;
    int rc = 0;
    while (!sl__rmulti_complete(m, &user, &rc, 1000000000))
        ;
    printf("# blocking: %s\n# multi:    %s\n", want, got);
    assert_ptr_equal(user, buf);
    assert_int_equal(wrc, SL_EIO);
    assert_int_equal(rc, wrc);
    assert_string_equal(got, want);
    assert_non_null(strstr(got, "/gone: bytes 100-149: HTTP 500 (after 2 "
                                "retries)"));
    sl__rmulti_close(m);
    sl__remote_close(r);
}

/* Only s3:// prefixes list; the message names the URL redacted. */
static void test_list_refusal_redacted(void **state)
{
    (void)state;
    char **names = NULL, err[512];
    int n = -1;
    int rc = sl__remote_list("http://alice:S3CRETpw@127.0.0.1:1/d/?token=TOK",
                             &names, &n, err, sizeof err);
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_null(names);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err, "http://***@127.0.0.1:1/d/?token=***: only "
                                "s3:// prefixes can be listed"));
    assert_null(strstr(err, "S3CRETpw"));
    assert_null(strstr(err, "=TOK"));
}

/* A stop: reads in flight end at once, each handed back failed. */
static void test_cancel(void **state)
{
    (void)state;
    uint64_t size;
    sl__remote_t *r = open_url("/slow", &size);
    sl__rmulti_t *m;
    char err[256], e[4][256];
    uint8_t buf[4][10];
    assert_int_equal(sl__rmulti_open(&m, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sl__rmulti_read(m, r, (uint64_t)i * 10, buf[i], 10,
                                         buf[i], e[i], sizeof e[i]),
                         0);
    void *user;
    int rc;
    assert_int_equal(sl__rmulti_complete(m, &user, &rc, 50000000), 0);
    int64_t t0 = sl__now_ns();
    sl__rmulti_cancel(m);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sl__rmulti_complete(m, &user, &rc, 0), 1);
        assert_int_equal(rc, SL_EIO);
        assert_non_null(
            strstr(((char(*)[256])e)[(uint8_t(*)[10])user - buf], "stopped"));
    }
    assert_int_equal(sl__rmulti_pending(m), 0);
    assert_true(sl__now_ns() - t0 < 1000000000LL);
    sl__rmulti_close(m);
    sl__remote_close(r);
}

/* A scattered read: pieces in order, gaps dropped; a failed one with
 * retries 0 is not retried, with -1 as a single read is. */
static void test_readv(void **state)
{
    (void)state;
    uint64_t size;
    sl__remote_t *r = open_url("/data", &size);
    sl__rmulti_t *m;
    char err[256], e[256];
    assert_int_equal(sl__rmulti_open(&m, err, sizeof err), 0);
    uint8_t p0[100], p1[7], p2[3000];
    const sl__rseg_t seg[5] = {{p0, sizeof p0},
                               {NULL, 50},
                               {p1, sizeof p1},
                               {NULL, 1},
                               {p2, sizeof p2}};
    uint64_t off = 30001; /* not divisible by 3: no 500 */
    assert_int_equal(sl__rmulti_readv(m, r, off, seg, 5, 0, p0, e, sizeof e),
                     0);
    void *user = NULL;
    int rc = -1;
    while (!sl__rmulti_complete(m, &user, &rc, 1000000000))
        ;
    assert_ptr_equal(user, p0);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < sizeof p0; i++)
        assert_int_equal(p0[i], byte_at(off + i));
    for (size_t i = 0; i < sizeof p1; i++)
        assert_int_equal(p1[i], byte_at(off + 150 + i));
    for (size_t i = 0; i < sizeof p2; i++)
        assert_int_equal(p2[i], byte_at(off + 158 + i));
    /* an offset divisible by 3, asked the first time: a 500 */
    int fails0 = atomic_load(&g_fails);
    off = 60000;
    assert_int_equal(sl__rmulti_readv(m, r, off, seg, 5, 0, p0, e, sizeof e),
                     0);
    while (!sl__rmulti_complete(m, &user, &rc, 1000000000))
        ;
    printf("# tried once: %s\n", e);
    assert_int_equal(rc, SL_EIO);
    assert_int_equal(atomic_load(&g_fails) - fails0, 1);
    assert_null(strstr(e, "retr"));
    off = 60003; /* the same with the usual retries: the second try works */
    assert_int_equal(sl__rmulti_readv(m, r, off, seg, 5, -1, p0, e, sizeof e),
                     0);
    while (!sl__rmulti_complete(m, &user, &rc, 1000000000))
        ;
    assert_int_equal(rc, 0);
    assert_int_equal(atomic_load(&g_fails) - fails0, 2);
    for (size_t i = 0; i < sizeof p2; i++)
        assert_int_equal(p2[i], byte_at(off + 158 + i));
    sl__rmulti_close(m);
    sl__remote_close(r);
}

static sl_loader_t *loader(const char *src, int threads, int depth)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 5;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.policy = SL_POLICY_STATIC;
    o.read_threads = threads;
    o.decode_threads = 2;
    o.io_depth = depth;
    o.seed = 11;
    o.epochs = 2;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(src, &o, &l), 0);
    return l;
}

static void shard_url(char *url, size_t n)
{
    snprintf(url, n, "http://127.0.0.1:%d/shard.sls", g_port);
}

/* Coalescing (in stored order, so neighbours are read together): fewer
 * requests, each sample fetched once, the stream of coalescing off; and
 * from /lone.sls, where every range of two records or more fails, each
 * coalesced request falls back to its records one by one: the same
 * stream again, no sample lost. */
static void test_loader_coalesce(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "remote loader, coalescing: hung");
    char url[128], lone[128];
    shard_url(url, sizeof url);
    snprintf(lone, sizeof lone, "http://127.0.0.1:%d/lone.sls", g_port);
    int64_t coal[3] = {-1, 0, 4096};
    const char *src[3] = {url, url, lone};
    uint64_t ref = 0;
    int64_t n0 = 0, reqs_off = 0;
    for (int i = 0; i < 3; i++) {
        sl_options_t o;
        sl_options_init(&o);
        o.batch_size = 5;
        o.image_size = 16;
        o.telemetry_ms = -1;
        o.policy = SL_POLICY_STATIC;
        o.read_threads = 2;
        o.decode_threads = 2;
        o.io_depth = 16;
        o.no_shuffle = 1;
        o.epochs = 2;
        o.coalesce_bytes = coal[i];
        sl_loader_t *l;
        assert_int_equal(sl_loader_create(src[i], &o, &l), 0);
        int64_t n;
        uint64_t d = tu_stream_digest(l, &n);
        sl_stats_t st;
        sl_stats_init(&st);
        sl_loader_stats(l, &st);
        printf("# %s, coalesce %lld: %lld requests for %lld samples, %lld "
               "fallbacks, %016llx\n",
               src[i], (long long)coal[i], (long long)st.requests,
               (long long)st.request_records, (long long)st.request_fallbacks,
               (unsigned long long)d);
        if (i == 0) {
            ref = d, n0 = n, reqs_off = st.requests;
            assert_int_equal(st.requests, n);
            assert_int_equal(st.request_fallbacks, 0);
        } else {
            assert_int_equal(d, ref);
            assert_int_equal(n, n0);
        }
        if (i == 1) {
            assert_true(st.requests * 2 < reqs_off);
            assert_int_equal(st.request_records, n);
        }
        if (i == 2) { /* each coalesced one failed, then one by one */
            assert_true(st.request_fallbacks > 0);
            assert_true(st.request_records - n >= 2 * st.request_fallbacks);
        }
        sl_loader_destroy(l);
    }
    tu_watchdog(0, 0, NULL);
}

static void test_loader_stream_same(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "remote loader: hung");
    char url[128];
    shard_url(url, sizeof url);
    int64_t n0, n;
    sl_loader_t *l = loader(g_shard, 2, SL_IO_DEPTH_OFF);
    uint64_t ref = tu_stream_digest(l, &n0);
    sl_loader_destroy(l);
    assert_int_equal(n0, 2 * 72);
    const int depths[4] = {SL_IO_DEPTH_OFF, 1, 8, 64};
    for (int i = 0; i < 4; i++) {
        int64_t t0 = sl__now_ns();
        l = loader(url, i == 1 ? 1 : 2, depths[i]);
        const char *what = "";
        int async = sl__testing_read_path(l, &what);
        uint64_t d = tu_stream_digest(l, &n);
        printf("# %s, io_depth %d: %s %016llx (%.2f s)\n", url, depths[i], what,
               (unsigned long long)d, (sl__now_ns() - t0) / 1e9);
        assert_int_equal(async, depths[i] != SL_IO_DEPTH_OFF);
        if (async)
            assert_string_equal(what, "curl multi");
        assert_int_equal(n, n0);
        assert_int_equal(d, ref);
        sl_loader_destroy(l);
    }
    tu_watchdog(0, 0, NULL);
}

typedef struct {
    sl_loader_t *l;
    atomic_int stop;
} flipper_t;

static void *flipper(void *arg)
{
    flipper_t *f = arg;
    for (int i = 0; !atomic_load(&f->stop); i++) {
        sl_loader_set(f->l, SL_PARAM_IO_DEPTH,
                      i % 3 == 0   ? 1
                      : i % 3 == 1 ? 5
                                   : 40);
        sl_loader_set(f->l, SL_PARAM_READ_THREADS, i % 2 ? 3 : 1);
        usleep(700);
    }
    return NULL;
}

/* Knobs flipped while next() runs, restarts mid-stream (the stop cancels
 * remote reads in flight): no hang, the same stream. */
static void test_loader_flip(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "remote loader, flipping knobs: hung");
    char url[128];
    shard_url(url, sizeof url);
    int64_t n0, n;
    sl_loader_t *l = loader(url, 2, 4);
    uint64_t ref = tu_stream_digest(l, &n0);
    atomic_store(&g_file_delay_us, 2000); /* reads in flight at each stop */
    flipper_t f = {l, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flipper, &f), 0);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(tu_stream_digest(l, &n), ref);
        assert_int_equal(n, n0);
        sl_position_t pos = {1, 3};
        assert_int_equal(sl_loader_start(l, &pos), 0);
        const sl_batch_t *b;
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_int_equal(b->epoch, 1);
        assert_int_equal(b->index, 3);
        sl_loader_release(l, b);
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    sl_loader_destroy(l);
    atomic_store(&g_file_delay_us, 0);
    tu_watchdog(0, 0, NULL);
}

/* "BASE/{shard-000000,gone-a,...}.tar": the tars in order, names[k] (k in
 * gone) replaced by "gone-K". BASE: the server's /wds or the folder. */
static void tar_list(char *out, size_t n, const char *base, int gone_a,
                     int gone_b)
{
    int w = snprintf(out, n, "%s/{", base);
    for (int k = 0; k < g_ntars; k++)
        w +=
            k == gone_a || k == gone_b
                ? snprintf(out + w, n - (size_t)w, "%sgone-%d", k ? "," : "", k)
                : snprintf(out + w, n - (size_t)w, "%sshard-%06d", k ? "," : "",
                           k);
    snprintf(out + w, n - (size_t)w, "}.tar");
}

static void same_index(const sl__recset_t *a, const sl__recset_t *b)
{
    assert_int_equal(a->nfiles, b->nfiles);
    assert_int_equal(sl__recset_count(a), sl__recset_count(b));
    for (int f = 0; f < a->nfiles; f++) {
        assert_int_equal(a->first[f], b->first[f]);
        assert_int_equal(a->files[f]->n, b->files[f]->n);
        for (int64_t k = 0; k < a->files[f]->n; k++) {
            assert_int_equal(a->files[f]->recs[k].off,
                             b->files[f]->recs[k].off);
            assert_int_equal(a->files[f]->recs[k].len,
                             b->files[f]->recs[k].len);
            assert_int_equal(a->files[f]->recs[k].label,
                             b->files[f]->recs[k].label);
        }
    }
}

static void *open_tars(void *arg)
{
    (void)arg;
    char spec[1024], err[512];
    tar_list(spec, sizeof spec, "", -1, -1);
    char url[1200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/wds%s", g_port, spec);
    sl__recset_t *r = NULL;
    int rc = sl__recset_open(url, 0, &r, err, sizeof err);
    intptr_t n = rc ? -1 : (intptr_t)sl__recset_count(r);
    sl__recset_close(r);
    return (void *)n;
}

/* Tars at URLs, opened several at once (data/recset): the index of the
 * same files on disk; errors and skips in list order. */
static void test_recset_open(void **state)
{
    (void)state;
    tu_watchdog(120, 0, "recset over HTTP: hung");
    char url[64], spec[1024], err[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/wds", g_port);
    sl__recset_t *loc, *rem;
    tar_list(spec, sizeof spec, g_wds, -1, -1);
    assert_int_equal(sl__recset_open(spec, 0, &loc, err, sizeof err), 0);
    tar_list(spec, sizeof spec, url, -1, -1);
    int rc = sl__recset_open(spec, 0, &rem, err, sizeof err);
    if (rc)
        printf("# %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(sl__recset_count(rem), 72);
    assert_int_equal(rem->nwarns, 0); /* every sidecar used */
    same_index(loc, rem);
    sl__recset_close(loc);
    sl__recset_close(rem);
    /* Two missing: the first in the list fails the open, every time. */
    tar_list(spec, sizeof spec, url, 1, 4);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(sl__recset_open(spec, 0, &rem, err, sizeof err),
                         SL_ENOTFOUND);
        assert_null(rem);
        assert_non_null(strstr(err, "gone-1.tar"));
        assert_null(strstr(err, "gone-4"));
    }
    /* Under skip: both noted, in order; the rest as on disk. */
    assert_int_equal(sl__recset_open(spec, 1, &rem, err, sizeof err), 0);
    assert_int_equal(rem->nnotes, 2);
    assert_non_null(strstr(rem->notes[0], "gone-1.tar"));
    assert_non_null(strstr(rem->notes[1], "gone-4.tar"));
    tar_list(spec, sizeof spec, g_wds, 1, 4);
    assert_int_equal(sl__recset_open(spec, 1, &loc, err, sizeof err), 0);
    same_index(loc, rem);
    sl__recset_close(loc);
    sl__recset_close(rem);
    /* Four threads opening at once (TSan: the openers, libcurl). */
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        assert_int_equal(pthread_create(&th[t], NULL, open_tars, NULL), 0);
    for (int t = 0; t < 4; t++) {
        void *n;
        pthread_join(th[t], &n);
        assert_int_equal((intptr_t)n, 72);
    }
    tu_watchdog(0, 0, NULL);
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(g_root);
    unlink(g_shard);
    tu_rmtree(g_wds);
    free(g_wds);
    free(g_root);
    free(g_shard);
    free(g_file);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_threads),
        cmocka_unit_test(test_failure_message),
        cmocka_unit_test(test_list_refusal_redacted),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_readv),
        cmocka_unit_test(test_loader_coalesce),
        cmocka_unit_test(test_loader_stream_same),
        cmocka_unit_test(test_loader_flip),
        cmocka_unit_test(test_recset_open),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
