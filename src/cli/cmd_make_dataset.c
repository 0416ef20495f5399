/* sluice make-dataset --synthetic DIR [--images N] [--classes K] [--seed S]
 *
 * Writes an ImageFolder tree DIR/class_XXX/img_XXXXX.jpg of photo-like JPEGs
 * (quality 90, ImageNet-like sizes: width 300..800, aspect 0.6..1.6, about
 * 100 KB each) so that decode cost is realistic: per class a colour
 * palette; per image a few random sinusoidal gradients, some filled shapes
 * and per-pixel noise. Everything is a function of the seed (Philox streams
 * per image, then a cheap xorshift per pixel). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/rng.h"
#include "cli.h"
#include "ops/image.h"

#define NWAVES 4
#define NSHAPES 6

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice make-dataset --synthetic DIR [--images N "
               "(1000)] [--classes K (10)] [--seed S (0)]\n");
}

static int mkdir_p(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

static inline uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static inline uint8_t clamp8(float v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
}

/* Fills rgb (w x h) for image `idx` of class `cls`. tx/ty: scratch of
 * NWAVES * w and NWAVES * h floats. */
static void synth(uint8_t *rgb, int w, int h, uint64_t seed, int cls,
                  int64_t idx, float *tx, float *ty)
{
    sl__rng_t pal, r;
    sl__rng_init(&pal, seed, 1, (uint64_t)cls, 100); /* class palette */
    sl__rng_init(&r, seed, 2, (uint64_t)idx, 101);   /* this image */
    float base[3][3];
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < 3; c++)
            base[i][c] = (float)sl__rng_uniform(&pal, 20, 235);
    /* Waves: separable products sin(fx x + px) * cos(fy y + py). */
    float amp[NWAVES][3];
    for (int k = 0; k < NWAVES; k++) {
        double fx = sl__rng_uniform(&r, 0.002, 0.06);
        double fy = sl__rng_uniform(&r, 0.002, 0.06);
        double px = sl__rng_uniform(&r, 0, 6.283),
               py = sl__rng_uniform(&r, 0, 6.283);
        for (int x = 0; x < w; x++)
            tx[k * w + x] = (float)sin(fx * x + px);
        for (int y = 0; y < h; y++)
            ty[k * h + y] = (float)cos(fy * y + py);
        for (int c = 0; c < 3; c++)
            amp[k][c] = (float)sl__rng_uniform(&r, -45, 45);
    }
    int mix = (int)sl__rng_below(&r, 3);
    uint32_t xs = sl__rng_u32(&r) | 1;
    for (int y = 0; y < h; y++) {
        float fy = (float)y / h;
        uint8_t *row = rgb + (size_t)y * w * 3;
        for (int x = 0; x < w; x++) {
            float fx = (float)x / w;
            uint32_t n = xorshift(&xs);
            for (int c = 0; c < 3; c++) {
                float v = base[mix][c] * (1 - fx) + base[(mix + 1) % 3][c] * fx;
                v = v * (1 - fy) * 0.5f + v * 0.5f +
                    base[(mix + 2) % 3][c] * fy * 0.5f;
                for (int k = 0; k < NWAVES; k++)
                    v += amp[k][c] * tx[k * w + x] * ty[k * h + y];
                v += (float)((n >> (8 * c)) & 63) * 0.6f - 18.9f; /* noise */
                row[3 * x + c] = clamp8(v);
            }
        }
    }
    /* Shapes: filled discs and rectangles in palette colours. */
    for (int s = 0; s < NSHAPES; s++) {
        int kind = (int)sl__rng_below(&r, 2);
        int cx = (int)sl__rng_below(&r, (uint64_t)w);
        int cy = (int)sl__rng_below(&r, (uint64_t)h);
        int rad = 10 + (int)sl__rng_below(&r, (uint64_t)(w / 5 + 1));
        const float *col = base[sl__rng_below(&r, 3)];
        float shade = (float)sl__rng_uniform(&r, 0.6, 1.2);
        for (int y = cy - rad; y <= cy + rad; y++) {
            if (y < 0 || y >= h)
                continue;
            for (int x = cx - rad; x <= cx + rad; x++) {
                if (x < 0 || x >= w)
                    continue;
                int dx = x - cx, dy = y - cy;
                if (kind == 0 && dx * dx + dy * dy > rad * rad)
                    continue;
                uint8_t *p = rgb + ((size_t)y * w + x) * 3;
                uint32_t n = xorshift(&xs);
                for (int c = 0; c < 3; c++)
                    p[c] = clamp8(col[c] * shade + 0.35f * (p[c] - 128) +
                                  (float)((n >> (8 * c)) & 15) - 7.5f);
            }
        }
    }
}

int sl__cmd_make_dataset(int argc, char **argv)
{
    const char *dir = NULL;
    long long images = 1000, classes = 10;
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--synthetic") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(a, "--images") && i + 1 < argc)
            images = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(a, "--classes") && i + 1 < argc)
            classes = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(a, "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "make-dataset: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!dir || images < 1 || classes < 1 || classes > 100000 ||
        images > 100000000) {
        usage(stderr);
        return 2;
    }
    if (mkdir_p(dir)) {
        fprintf(stderr, "make-dataset: cannot create %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    for (long long c = 0; c < classes; c++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/class_%03lld", dir, c);
        if (mkdir_p(p)) {
            fprintf(stderr, "make-dataset: cannot create %s: %s\n", p,
                    strerror(errno));
            return 1;
        }
    }
    int tty = isatty(2);
    uint8_t *rgb = malloc((size_t)800 * 1334 * 3);
    float *tx = malloc(sizeof(float) * NWAVES * 800);
    float *ty = malloc(sizeof(float) * NWAVES * 1334);
    sl__bytes_t jpg = {0};
    double total = 0;
    int64_t t0 = sl__now_ns();
    int rc = 0;
    for (long long i = 0; i < images && !rc; i++) {
        int cls = (int)(i % classes);
        sl__rng_t r;
        sl__rng_init(&r, seed, 0, (uint64_t)i, 102);
        int w = 300 + (int)sl__rng_below(&r, 501);
        double aspect = sl__rng_uniform(&r, 0.6, 1.6);
        int h = (int)lround(w / aspect);
        synth(rgb, w, h, seed, cls, i, tx, ty);
        char err[256];
        if (sl__jpeg_encode(rgb, w, h, 90, &jpg, err, sizeof err)) {
            fprintf(stderr, "make-dataset: %s\n", err);
            rc = 1;
            break;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/class_%03d/img_%05lld.jpg", dir, cls,
                 i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(jpg.p, 1, jpg.n, f) != jpg.n) {
            fprintf(stderr, "make-dataset: cannot write %s: %s\n", path,
                    strerror(errno));
            rc = 1;
        }
        if (f && fclose(f) && !rc) {
            fprintf(stderr, "make-dataset: cannot write %s\n", path);
            rc = 1;
        }
        total += (double)jpg.n;
        if (tty && (i % 16 == 15 || i + 1 == images))
            fprintf(stderr, "\r%lld/%lld images", i + 1, images);
    }
    if (tty)
        fprintf(stderr, "\n");
    if (!rc) {
        double sec = (sl__now_ns() - t0) / 1e9;
        printf("wrote %lld images in %lld classes to %s: %.1f MB, mean %.1f "
               "KB (%.1f s)\n",
               images, classes, dir, total / 1e6, total / images / 1e3, sec);
    }
    sl__bytes_free(&jpg);
    free(rgb);
    free(tx);
    free(ty);
    return rc;
}
