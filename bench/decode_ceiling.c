/* decode_ceiling: how fast can one core decode this folder's JPEGs?
 *
 *   decode_ceiling DIR [--passes N] [--mode full|crop] [--size S] [--json]
 *
 * Loads every image of an ImageFolder tree into memory first (no I/O in the
 * timed loop), then, on one thread, for N passes (default 5):
 *   full: plain libjpeg-turbo decode of each JPEG at full size (JCS_EXT_RGB,
 *         default settings: ISLOW IDCT, fancy upsampling), the upper bound
 *         any loader that decodes full images can reach per core;
 *   crop: sluice's fused decode + RandomResizedCrop(S) + flip to uint8 CHW,
 *         once at full scale and once with DCT scaling, to show what
 *         region decode and DCT scaling buy.
 * Prints img/s per pass and the median; --json adds one machine-readable
 * last line. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "base/base.h"
#include "base/rng.h"
#include "data/folder.h"
#include "ops/image.h"

typedef struct blob {
    uint8_t *p;
    size_t n;
} blob_t;

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jerr_t;

static void on_error(j_common_ptr c)
{
    longjmp(((jerr_t *)c->err)->jb, 1);
}

static void on_output(j_common_ptr c)
{
    (void)c;
}

static int is_jpeg(const blob_t *b)
{
    return b->n > 2 && b->p[0] == 0xFF && b->p[1] == 0xD8;
}

/* Plain full decode; returns 0 or -1. Everything that must survive the
 * longjmp lives in *d or *rows. */
static int decode_full(struct jpeg_decompress_struct *d, jerr_t *e,
                       const blob_t *b, sl__bytes_t *rows)
{
    if (setjmp(e->jb)) {
        jpeg_abort_decompress(d);
        return -1;
    }
    jpeg_mem_src(d, b->p, (unsigned long)b->n);
    jpeg_read_header(d, TRUE);
    d->out_color_space = JCS_EXT_RGB;
    jpeg_start_decompress(d);
    size_t stride = (size_t)d->output_width * d->output_components;
    if (sl__bytes_reserve(rows, stride * d->output_height)) {
        jpeg_abort_decompress(d);
        return -1;
    }
    while (d->output_scanline < d->output_height) {
        JSAMPROW r = rows->p + stride * d->output_scanline;
        jpeg_read_scanlines(d, &r, 1);
    }
    jpeg_finish_decompress(d);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int load_all(const char *root, blob_t **out, int64_t *count, double *mb)
{
    char err[512];
    sl__folder_t *f;
    if (sl__folder_scan(root, 0, &f, err, sizeof err)) {
        fprintf(stderr, "decode_ceiling: %s\n", err);
        return -1;
    }
    blob_t *bl = calloc((size_t)f->n + 1, sizeof *bl);
    size_t total = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < f->n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root, f->paths[i]);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            continue;
        fseek(fp, 0, SEEK_END);
        long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        if (n <= 0) {
            fclose(fp);
            continue;
        }
        bl[k].p = malloc((size_t)n);
        bl[k].n = (size_t)n;
        if (fread(bl[k].p, 1, (size_t)n, fp) == (size_t)n) {
            total += (size_t)n;
            k++;
        } else {
            free(bl[k].p);
        }
        fclose(fp);
    }
    sl__folder_free(f);
    *out = bl;
    *count = k;
    *mb = total / 1e6;
    return 0;
}

int main(int argc, char **argv)
{
    const char *root = NULL, *mode = "full";
    int passes = 5, json = 0, size = 224;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--passes") && i + 1 < argc)
            passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] != '-' && !root)
            root = argv[i];
        else {
            fprintf(stderr,
                    "usage: %s DIR [--passes N] [--mode full|crop] "
                    "[--size S] [--json]\n",
                    argv[0]);
            return 2;
        }
    }
    int crop = !strcmp(mode, "crop");
    if (!root || passes < 1 || passes > 1000 || size < 1 ||
        (!crop && strcmp(mode, "full"))) {
        fprintf(stderr,
                "usage: %s DIR [--passes N] [--mode full|crop] "
                "[--size S] [--json]\n",
                argv[0]);
        return 2;
    }
    blob_t *bl;
    int64_t n;
    double mb;
    if (load_all(root, &bl, &n, &mb))
        return 1;
    printf("loaded %lld files (%.1f MB) from %s\n", (long long)n, mb, root);

    double *rate = calloc((size_t)passes * 2, sizeof *rate);
    double med[2] = {0, 0};
    int64_t failed = 0;
    if (!crop) {
        struct jpeg_decompress_struct d;
        jerr_t e;
        d.err = jpeg_std_error(&e.pub);
        e.pub.error_exit = on_error;
        e.pub.output_message = on_output;
        jpeg_create_decompress(&d);
        sl__bytes_t rows = {0};
        int64_t jpegs = 0;
        for (int p = 0; p < passes; p++) {
            int64_t t0 = sl__now_ns(), ok = 0;
            failed = 0;
            for (int64_t i = 0; i < n; i++) {
                if (!is_jpeg(&bl[i]))
                    continue;
                if (decode_full(&d, &e, &bl[i], &rows) == 0)
                    ok++;
                else
                    failed++;
            }
            double s = (sl__now_ns() - t0) / 1e9;
            jpegs = ok;
            rate[p] = ok / s;
            printf("pass %d: %lld images in %.3f s = %.1f img/s\n", p + 1,
                   (long long)ok, s, rate[p]);
        }
        jpeg_destroy_decompress(&d);
        sl__bytes_free(&rows);
        med[0] = median(rate, passes);
        printf("median: %.1f img/s (one core, full decode, %lld JPEGs, %lld "
               "failed)\n",
               med[0], (long long)jpegs, (long long)failed);
        printf("decode ceiling (2 cores) = 2 x median = %.1f img/s\n",
               2 * med[0]);
        if (json)
            printf("{\"mode\":\"full\",\"images\":%lld,\"failed\":%lld,"
                   "\"median_img_s\":%.2f,\"ceiling_2cores_img_s\":%.2f}\n",
                   (long long)jpegs, (long long)failed, med[0], 2 * med[0]);
    } else {
        sl__scratch_t *s = sl__scratch_create();
        uint8_t *out = malloc((size_t)size * size * 3);
        sl__xform_t x;
        memset(&x, 0, sizeof x);
        x.mode = SL_XF_RRC;
        x.scale[0] = 0.08;
        x.scale[1] = 1.0;
        x.ratio[0] = 3.0 / 4.0;
        x.ratio[1] = 4.0 / 3.0;
        x.flip = 1;
        x.out_w = x.out_h = size;
        x.dtype = SL_DTYPE_UINT8;
        x.layout = SL_LAYOUT_CHW;
        for (int dct = 0; dct < 2; dct++) {
            x.dct_scale = dct;
            for (int p = 0; p < passes; p++) {
                int64_t t0 = sl__now_ns(), ok = 0;
                failed = 0;
                for (int64_t i = 0; i < n; i++) {
                    sl__rng_t cr, fr;
                    sl__rng_init(&cr, 1, (uint64_t)p, (uint64_t)i, SL_RNG_CROP);
                    sl__rng_init(&fr, 1, (uint64_t)p, (uint64_t)i, SL_RNG_FLIP);
                    char err[256];
                    if (sl__image_process(bl[i].p, bl[i].n, &x, &cr, &fr, s,
                                          out, err, sizeof err) == 0)
                        ok++;
                    else
                        failed++;
                }
                double sec = (sl__now_ns() - t0) / 1e9;
                double *r = rate + dct * passes;
                r[p] = ok / sec;
                printf("%s pass %d: %lld images in %.3f s = %.1f img/s\n",
                       dct ? "dct-scaled" : "full-scale", p + 1, (long long)ok,
                       sec, r[p]);
            }
            med[dct] = median(rate + dct * passes, passes);
        }
        printf("median RRC-%d (one core): full-scale %.1f img/s, dct-scaled "
               "%.1f img/s (%lld failed)\n",
               size, med[0], med[1], (long long)failed);
        if (json)
            printf("{\"mode\":\"crop\",\"size\":%d,\"images\":%lld,"
                   "\"failed\":%lld,\"median_img_s\":%.2f,"
                   "\"median_dct_img_s\":%.2f}\n",
                   size, (long long)n, (long long)failed, med[0], med[1]);
        free(out);
        sl__scratch_destroy(s);
    }
    for (int64_t i = 0; i < n; i++)
        free(bl[i].p);
    free(bl);
    free(rate);
    return 0;
}
