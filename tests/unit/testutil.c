#include "testutil.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/base.h"
#include "codec/codec.h"
#include "data/shard.h"
#include "ops/image.h"

char *tu_tmpdir(const char *tag)
{
    const char *base = getenv("SL_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    char *path = NULL;
    if (asprintf(&path, "%s/%s-XXXXXX", base, tag) < 0)
        return NULL;
    if (!mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

int tu_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

void tu_write_at(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(tu_write_file(path, p, n), 0);
}

uint8_t *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p)
        *n = (size_t)len;
    return p;
}

char *tu_shared_data(const char *sub)
{
    const char *base = getenv("SL_SHARED_DATA");
    if (!base)
        base = "../shared/data";
    char *path = NULL;
    if (asprintf(&path, "%s/%s", base, sub) < 0)
        return NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("shared data %s absent: skipping what needs it\n", path);
        free(path);
        return NULL;
    }
    return path;
}

int tu_photos(int limit, int per_class,
              void (*fn)(void *ctx, const tu_photo_t *p), void *ctx)
{
    char *root = tu_shared_data("imagenet-sample");
    if (!root)
        return -1;
    DIR *d = opendir(root);
    assert_non_null(d);
    sl__scratch_t *s = sl__scratch_create();
    sl__bytes_t pix = {0};
    int files = 0;
    struct dirent *e;
    while (files < limit && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *d2 = opendir(sub);
        if (!d2)
            continue;
        struct dirent *f;
        int in_class = 0;
        while (files < limit && (!per_class || in_class < per_class) &&
               (f = readdir(d2))) {
            if (f->d_name[0] == '.')
                continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            tu_photo_t p = {.path = path, .i = files};
            uint8_t *b = tu_read_file(path, &p.n);
            assert_non_null(b);
            char err[256];
            if (sl__image_decode_full(b, p.n, 0, s, &pix, &p.w, &p.h, err,
                                      sizeof err))
                fail_msg("%s: %s", path, err);
            p.bytes = b, p.rgb = pix.p, p.rgb_n = pix.n;
            fn(ctx, &p);
            free(b);
            files++, in_class++;
        }
        closedir(d2);
    }
    closedir(d);
    sl__bytes_free(&pix);
    sl__scratch_destroy(s);
    free(root);
    return files;
}

void tu_rmtree(const char *path)
{
    char *cmd = NULL;
    if (asprintf(&cmd, "rm -rf '%s'", path) >= 0) {
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", path);
    }
    free(cmd);
}

char *tu_jpeg_tree(const char *tag, int classes, int per_class, int w, int h)
{
    char *root = tu_tmpdir(tag);
    char path[1024];
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    for (int c = 0; c < classes; c++) {
        snprintf(path, sizeof path, "%s/c%d", root, c);
        mkdir(path, 0755);
        for (int i = 0; i < per_class; i++) {
            for (size_t k = 0; k < (size_t)w * (size_t)h * 3; k++)
                rgb[k] = (uint8_t)(k * 7 + (size_t)i * 31 + (size_t)c);
            sl__bytes_t out = {0};
            char err[256];
            assert_int_equal(
                sl__jpeg_encode(rgb, w, h, 90, &out, err, sizeof err), 0);
            snprintf(path, sizeof path, "%s/c%d/i%02d.jpg", root, c, i);
            assert_int_equal(tu_write_file(path, out.p, out.n), 0);
            sl__bytes_free(&out);
        }
    }
    free(rgb);
    return root;
}

char *tu_jpeg_shard(const char *root, int classes, int per_class)
{
    char p[4096];
    snprintf(p, sizeof p, "%s.sls", root);
    char *shard = strdup(p);
    sl__shard_writer_t *w;
    assert_int_equal(sl__shard_writer_open(shard, SL_CODEC_ZSTD, &w, NULL, 0),
                     0);
    for (int c = 0; c < classes; c++)
        for (int i = 0; i < per_class; i++) {
            snprintf(p, sizeof p, "%s/c%d/i%02d.jpg", root, c, i);
            size_t n;
            uint8_t *b = tu_read_file(p, &n);
            assert_non_null(b);
            assert_int_equal(
                sl__shard_writer_add(w, b, n, c, p + strlen(root) + 1, NULL, 0),
                0);
            free(b);
        }
    assert_int_equal(sl__shard_writer_finish(w, NULL, 0), 0);
    return shard;
}

void tu_tree_shard(const char *tag, int classes, int per_class, int w, int h,
                   char **root, char **shard)
{
    *root = tu_jpeg_tree(tag, classes, per_class, w, h);
    *shard = tu_jpeg_shard(*root, classes, per_class);
}

void tu_tree_shard_remove(char *root, char *shard)
{
    tu_rmtree(root);
    unlink(shard);
    free(root);
    free(shard);
}

uint64_t tu_stream_digest(sl_loader_t *l, int64_t *samples)
{
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc;
    *samples = 0;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        XXH3_64bits_update(h, b->data, (size_t)b->n * b->sample_bytes);
        XXH3_64bits_update(h, b->labels, (size_t)b->n * sizeof(int64_t));
        XXH3_64bits_update(h, b->indices, (size_t)b->n * sizeof(int64_t));
        *samples += b->n;
        sl_loader_release(l, b);
    }
    if (rc != SL_EEND)
        printf("# %s\n", sl_loader_last_error(l));
    assert_int_equal(rc, SL_EEND);
    uint64_t d = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return d;
}

static char watchdog_msg[256];

static void watchdog_fire(int sig)
{
    (void)sig;
    size_t n = strlen(watchdog_msg);
    (void)!write(2, watchdog_msg, n);
    _exit(1);
}

void tu_watchdog(unsigned sec, int cpu, const char *what)
{
    if (sec) {
        snprintf(watchdog_msg, sizeof watchdog_msg,
                 "watchdog: %s (over %u s of %s)\n", what, sec,
                 cpu ? "CPU" : "wall time");
        signal(cpu ? SIGVTALRM : SIGALRM, watchdog_fire);
    }
    struct itimerval t = {{0, 0}, {(time_t)sec, 0}};
    setitimer(cpu ? ITIMER_VIRTUAL : ITIMER_REAL, &t, NULL);
}

uint64_t tu_rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

size_t tu_b64(const uint8_t *in, size_t n, char *out)
{
    static const char A[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    return o;
}
