/* The GPU stage on a GPU (issue 19): every photo of a folder through the
 * real stage (nvJPEG + the resample kernels) and through the CPU path
 * without DCT scaling, with the same crop and flip draws, compared pixel
 * by pixel; refusals counted by reason; then the stage's own rate.
 *
 *   gpu_check DIR [max_images] [passes]
 *
 * Prints one line per variant and a JSON line ("gpu_check: {...}").
 * Exits 77 (skip) where the stage cannot start (no kernels in this build,
 * no CUDA runtime, nvJPEG or device: the reason printed), 1 when a sample
 * fails or differs by more than the decoders can explain (mean absolute
 * difference over 8 levels: a wrong box, flip or layout) or when
 * repeated passes do not reproduce the first byte for byte, 0 otherwise.
 * The training variant runs twice, with nvJPEG's ROI decode (each image
 * decoded to its crop's region, where the hardware backend has it) and
 * with whole images (SL_GPU_ROI=0): their pixels compared ("roi_vs_whole")
 * and their rates side by side. SL_GPU_CHECK_EXACT=1 (over the simulated
 * runtime, whose decoder is the CPU's: tests' gpu.check_sim) fails on any
 * difference at all, against the CPU path and between ROI and whole.
 * ctest runs it as gpu.check over the ImageNet sample (skipped here: no
 * GPU); bench/gpu/run runs it on the device machine. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/rng.h"
#include "gpu/cuda_stage.h"
#include "gpu/rt.h"
#include "ops/image.h"

typedef struct file {
    uint8_t *b;
    size_t n;
    char path[512];
} file_t;

static file_t *files;
static int nfiles;

static void add_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) == (size_t)n) {
        files[nfiles].b = b;
        files[nfiles].n = (size_t)n;
        snprintf(files[nfiles].path, sizeof files[nfiles].path, "%s", path);
        nfiles++;
    } else {
        free(b);
    }
    fclose(f);
}

/* ImageFolder: DIR/class/file, sorted by readdir order (any order does). */
static void list_files(const char *root, int max)
{
    files = calloc((size_t)max, sizeof *files);
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && (e = readdir(d)) && nfiles < max) {
        if (e->d_name[0] == '.')
            continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *d2 = opendir(sub);
        if (!d2) {
            add_file(sub);
            continue;
        }
        struct dirent *f;
        while ((f = readdir(d2)) && nfiles < max) {
            if (f->d_name[0] == '.')
                continue;
            char p[2048];
            snprintf(p, sizeof p, "%s/%s", sub, f->d_name);
            add_file(p);
        }
        closedir(d2);
    }
    if (d)
        closedir(d);
}

typedef struct result {
    int status;
    char why[160];
} result_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void on_done(void *ctx, sl__gpu_job_t *job, int status, const char *why)
{
    result_t *r = (result_t *)ctx + (intptr_t)job->tag;
    pthread_mutex_lock(&mu);
    r->status = status;
    snprintf(r->why, sizeof r->why, "%s", why);
    pthread_mutex_unlock(&mu);
}

/* One transform variant: correctness against the CPU path, then the rate
 * over `passes` submissions of every photo. 0, or 1 on a failure. With
 * keep, *keep gets the first pass's outputs (sample i at i x its size;
 * the caller frees) and done[i] 1 where sample i was done on the GPU. */
static int last_roi; /* the last variant's stage decoded regions */

static int run_variant(const char *label, const sl__xform_t *x, int passes,
                       char *json, size_t jcap, uint8_t **keep, int *done_i)
{
    size_t esz = x->dtype == SL_DTYPE_FLOAT32 ? 4 : 1;
    size_t sb = (size_t)x->out_w * x->out_h * 3 * esz;
    char err[512];
    sl__gpu_stage_t *st = sl__cuda_stage_create(x, sb, 0, 0, err, sizeof err);
    if (!st) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    sl__gpu_job_t *jobs = calloc((size_t)nfiles, sizeof *jobs);
    result_t *res = calloc((size_t)nfiles, sizeof *res);
    uint8_t *gpu = malloc(sb * (size_t)nfiles), *cpu = malloc(sb);
    sl__scratch_t *s = sl__scratch_create();
    int eligible = 0;
    for (int i = 0; i < nfiles; i++) {
        sl__rng_t c, f;
        sl__rng_init(&c, 7, 0, (uint64_t)i, SL_RNG_CROP);
        sl__rng_init(&f, 7, 0, (uint64_t)i, SL_RNG_FLIP);
        sl__gpu_job_t *j = &jobs[i];
        if (sl__image_geometry(files[i].b, files[i].n, x, &c, &f, j->box,
                               &j->flip, err, sizeof err)) {
            res[i].status = -1; /* the CPU path's error; not submitted */
            continue;
        }
        j->bytes = files[i].b;
        j->n = files[i].n;
        j->out = gpu + (size_t)i * sb;
        j->tag = (void *)(intptr_t)i;
        sl__gpu_job_t *jp = j;
        res[i].status = -2;
        if (st->submit(st, &jp, 1, on_done, res) == 0)
            eligible++;
    }
    st->drain(st);

    int done = 0, refused = 0, failed = 0, bad = 0;
    double sum_abs = 0, worst_mean = 0, sq = 0;
    long long exact = 0, within2 = 0, within8 = 0, values = 0;
    double max_abs = 0;
    char reasons[4][160] = {{0}};
    int rcount[4] = {0};
    for (int i = 0; i < nfiles; i++) {
        if (res[i].status == SL__GPU_REFUSED) {
            refused++;
            int k = 0;
            while (k < 3 && reasons[k][0] && strcmp(reasons[k], res[i].why))
                k++;
            if (!reasons[k][0])
                snprintf(reasons[k], sizeof reasons[k], "%s", res[i].why);
            rcount[k]++;
            continue;
        }
        if (res[i].status == SL__GPU_FAILED) {
            failed++;
            printf("FAIL %s: %s\n", files[i].path, res[i].why);
            continue;
        }
        if (res[i].status != SL__GPU_DONE)
            continue;
        done++;
        sl__rng_t c, f;
        sl__rng_init(&c, 7, 0, (uint64_t)i, SL_RNG_CROP);
        sl__rng_init(&f, 7, 0, (uint64_t)i, SL_RNG_FLIP);
        sl__xform_t xc = *x;
        xc.dct_scale = 0;
        if (sl__image_process(files[i].b, files[i].n, &xc, &c, &f, s, cpu, err,
                              sizeof err)) {
            printf("CPU path fails where the GPU did not: %s: %s\n",
                   files[i].path, err);
            continue;
        }
        size_t nv = sb / esz;
        double sa = 0;
        for (size_t k = 0; k < nv; k++) {
            double a, b;
            if (esz == 4) { /* back to 8-bit levels through the std */
                int ch = x->layout == SL_LAYOUT_CHW
                             ? (int)(k / ((size_t)x->out_w * x->out_h))
                             : (int)(k % 3);
                a = ((float *)(gpu + (size_t)i * sb))[k] * x->std[ch] * 255.0;
                b = ((float *)cpu)[k] * x->std[ch] * 255.0;
            } else {
                a = gpu[(size_t)i * sb + k];
                b = cpu[k];
            }
            double d = a > b ? a - b : b - a;
            sa += d;
            sq += d * d;
            exact += d < 1e-3;
            within2 += d <= 2.0 + 1e-3;
            within8 += d <= 8.0 + 1e-3;
            if (d > max_abs)
                max_abs = d;
        }
        values += (long long)nv;
        sum_abs += sa;
        double mean = sa / (double)nv;
        if (mean > worst_mean)
            worst_mean = mean;
        if (mean > 8.0) {
            bad++;
            printf("DIFFERS %s: mean |gpu - cpu| %.2f levels\n", files[i].path,
                   mean);
        }
    }

    /* The first pass's outputs, to check the timed passes reproduce them
     * byte for byte (placement gpu is deterministic on one GPU). */
    uint8_t *first = malloc(sb * (size_t)nfiles);
    if (first)
        memcpy(first, gpu, sb * (size_t)nfiles);
    /* The stage's own rate: every eligible photo, `passes` times. */
    int64_t t0 = sl__now_ns();
    long long sent = 0;
    for (int p = 0; p < passes; p++)
        for (int i = 0; i < nfiles; i++)
            if (res[i].status == SL__GPU_DONE) {
                sl__gpu_job_t *jp = &jobs[i];
                st->submit(st, &jp, 1, on_done, res);
                sent++;
            }
    st->drain(st);
    double secs = (double)(sl__now_ns() - t0) / 1e9;
    int reproduced = first != NULL;
    for (int i = 0; first && i < nfiles; i++)
        if (res[i].status == SL__GPU_DONE &&
            memcmp(first + (size_t)i * sb, gpu + (size_t)i * sb, sb))
            reproduced = 0;
    for (int i = 0; done_i && i < nfiles; i++)
        done_i[i] = res[i].status == SL__GPU_DONE;
    if (keep)
        *keep = first;
    else
        free(first);
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    size_t nvj = sl__cuda_stage_nvjpeg_bytes(); /* before the last stage
                                                   goes: then it is freed */
    st->destroy(st);
    last_roi = ss.roi;

    double mean_abs = values ? sum_abs / (double)values : 0;
    double mse = values ? sq / (double)values : 0;
    double psnr = mse > 0 ? 10.0 * log10(255.0 * 255.0 / mse) : 99.0;
    printf(
        "%s: %d images: %d on the GPU, %d refused, %d failed; |gpu - cpu "
        "no-DCT| mean %.3f, worst image mean %.2f, max %.0f levels, PSNR %.1f "
        "dB; exact %.1f %%, within 2: %.2f %%, within 8: %.3f %%; "
        "repeated passes %s; stage rate %.0f img/s (%lld in %.2f s, %lld "
        "groups, %.1f per group); ROI decode %s, %.1f %% of the pixels "
        "decoded; GPU memory: the stage's slots %.0f MiB (its budget %.0f), "
        "nvJPEG's own %.0f MiB\n",
        label, nfiles, done, refused, failed, mean_abs, worst_mean, max_abs,
        psnr, values ? 100.0 * exact / values : 0,
        values ? 100.0 * within2 / values : 0,
        values ? 100.0 * within8 / values : 0,
        reproduced ? "byte-identical" : "DIFFER", secs > 0 ? sent / secs : 0,
        sent, secs, ss.groups, ss.groups ? (double)ss.samples / ss.groups : 0,
        ss.roi       ? "on"
        : ss.roi_off ? "refused by nvJPEG"
                     : "off",
        ss.px_images > 0 ? 100.0 * ss.px_decoded / ss.px_images : 0,
        ss.dev_bytes / 1048576.0, SL__GPU_BUDGET_DEFAULT / 1048576.0,
        nvj / 1048576.0);
    if (ss.roi_off)
        printf("  ROI decode turned off: nvJPEG status %d\n", ss.roi_off);
    printf("  nvJPEG %s backend; per-image check %s, %lld images refused by "
           "it; preallocated %s; kernels loaded and warmed in %.3f s\n",
           ss.hw_backend ? "hardware" : "default",
           ss.hw_check       ? "on"
           : ss.hw_check_off ? "refused by nvJPEG"
                             : "off",
           ss.hw_unsupported,
           ss.prealloc_w     ? "yes"
           : ss.prealloc_err ? "refused"
                             : "no",
           ss.load_s);
    if (ss.prealloc_w)
        printf("  preallocation: groups of %d images of up to %d x %d\n",
               ss.group_max, ss.prealloc_w, ss.prealloc_h);
    if (ss.hw_check_off || ss.prealloc_err)
        printf("  nvJPEG status: per-image check %d, preallocation %d\n",
               ss.hw_check_off, ss.prealloc_err);
    for (int k = 0; k < 4 && reasons[k][0]; k++)
        printf("  refused %d: %s\n", rcount[k], reasons[k]);
    snprintf(json, jcap,
             "\"%s\": {\"images\": %d, \"gpu\": %d, \"refused\": %d, "
             "\"failed\": %d, \"mean_abs\": %.4f, \"worst_mean\": %.3f, "
             "\"max_abs\": %.1f, \"psnr_db\": %.2f, \"exact_pct\": %.2f, "
             "\"within2_pct\": %.3f, \"within8_pct\": %.4f, "
             "\"reproduced\": %d, \"rate\": %.1f, \"groups\": %lld, "
             "\"roi\": %d, \"roi_off\": %d, \"decoded_frac\": %.4f, "
             "\"dev_bytes\": %zu, \"nvjpeg_bytes\": %zu, "
             "\"hw_backend\": %d, \"hw_check\": %d, \"hw_check_off\": %d, "
             "\"hw_unsupported\": %lld, \"prealloc_w\": %d, "
             "\"prealloc_h\": %d, \"prealloc_err\": %d, \"load_s\": %.4f}",
             label, nfiles, done, refused, failed, mean_abs, worst_mean,
             max_abs, psnr, values ? 100.0 * exact / values : 0,
             values ? 100.0 * within2 / values : 0,
             values ? 100.0 * within8 / values : 0, reproduced,
             secs > 0 ? sent / secs : 0, ss.groups, ss.roi, ss.roi_off,
             ss.px_images > 0 ? ss.px_decoded / ss.px_images : 0, ss.dev_bytes,
             nvj, ss.hw_backend, ss.hw_check, ss.hw_check_off,
             ss.hw_unsupported, ss.prealloc_w, ss.prealloc_h, ss.prealloc_err,
             ss.load_s);
    (void)eligible;
    free(jobs);
    free(res);
    free(gpu);
    free(cpu);
    sl__scratch_destroy(s);
    const char *ex = getenv("SL_GPU_CHECK_EXACT");
    int inexact = ex && !strcmp(ex, "1") && exact != values;
    if (inexact)
        printf("FAIL %s: not exact (SL_GPU_CHECK_EXACT=1)\n", label);
    return failed || bad || done == 0 || !reproduced || inexact;
}

/* One epoch's stream digest through a loader over root: placement gpu,
 * host batches or device batches (each copied back through the CUDA
 * runtime to be hashed). 0 on failure, printing why. */
static uint64_t loader_digest(const char *root, int device_batches, int *n)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 64;
    o.image_size = 224;
    o.seed = 11;
    o.placement = SL_PLACEMENT_GPU;
    o.on_error = SL_ON_ERROR_SKIP;
    o.device_batches = device_batches;
    sl_loader_t *l = NULL;
    if (sl_loader_create(root, &o, &l) || sl_loader_start(l, NULL)) {
        printf("device batches: %s\n", sl_loader_last_error(l));
        sl_loader_destroy(l);
        return 0;
    }
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    uint8_t *host = malloc((size_t)64 * 224 * 224 * 3);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over every byte */
    const sl_batch_t *b;
    *n = 0;
    while (host && sl_loader_next(l, &b) == 0) {
        size_t bytes = (size_t)b->n * b->sample_bytes;
        const uint8_t *p = b->data;
        if (b->device >= 0) {
            if (rt->memcpy_async(host, b->data, bytes, SL__D2H, NULL) ||
                rt->stream_synchronize(NULL)) {
                printf("device batches: copying a batch back failed\n");
                break;
            }
            p = host;
        }
        for (size_t i = 0; i < bytes; i++)
            h = (h ^ p[i]) * 1099511628211ull;
        *n += b->n;
        sl_loader_release(l, b);
    }
    free(host);
    sl_loader_destroy(l);
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_check DIR [max_images] [passes]\n");
        return 2;
    }
    int max = argc > 2 ? atoi(argv[2]) : 1000;
    int passes = argc > 3 ? atoi(argv[3]) : 5;
    if (!sl__cuda_stage_built()) {
        printf("SKIP: the GPU stage is not in this build (no nvcc)\n");
        return 77;
    }
    list_files(argv[1], max > 0 ? max : 1000);
    if (nfiles == 0) {
        printf("SKIP: no images under %s\n", argv[1]);
        return 77;
    }
    sl__xform_t x = {0};
    x.mode = SL_XF_RRC;
    x.scale[0] = 0.08, x.scale[1] = 1;
    x.ratio[0] = 3.0 / 4, x.ratio[1] = 4.0 / 3;
    x.flip = 1;
    x.out_w = x.out_h = 224;
    x.dtype = SL_DTYPE_UINT8;
    x.layout = SL_LAYOUT_CHW;
    const float mean[3] = {0.485f, 0.456f, 0.406f},
                std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(x.mean, mean, sizeof mean);
    memcpy(x.std, std, sizeof std);
    char j1[1536], j2[1536], jw[1536], jr[256];
    uint8_t *with_roi = NULL, *whole = NULL;
    int *done_roi = calloc((size_t)nfiles, sizeof(int));
    int *done_whole = calloc((size_t)nfiles, sizeof(int));
    int rc = run_variant("train_u8_chw", &x, passes, j1, sizeof j1, &with_roi,
                         done_roi);
    if (rc == 77) {
        free(done_roi);
        free(done_whole);
        return 77;
    }
    /* The same with whole images: ROI's pixels against whole decodes' (the
     * caller's SL_GPU_ROI put back after). Not where ROI was off. */
    int rcw = 0;
    snprintf(jw, sizeof jw, "\"train_u8_chw_whole\": null");
    if (last_roi) {
        const char *was = getenv("SL_GPU_ROI");
        char *keep_was = was ? strdup(was) : NULL;
        setenv("SL_GPU_ROI", "0", 1);
        rcw = run_variant("train_u8_chw_whole", &x, passes, jw, sizeof jw,
                          &whole, done_whole);
        if (keep_was)
            setenv("SL_GPU_ROI", keep_was, 1);
        else
            unsetenv("SL_GPU_ROI");
        free(keep_was);
    }
    size_t sb = (size_t)x.out_w * x.out_h * 3;
    long long nv = 0, same = 0;
    int ni = 0, max_d = 0;
    for (int i = 0; with_roi && whole && i < nfiles; i++) {
        if (!done_roi[i] || !done_whole[i])
            continue;
        ni++;
        for (size_t k = 0; k < sb; k++) {
            int d = abs((int)with_roi[(size_t)i * sb + k] -
                        (int)whole[(size_t)i * sb + k]);
            same += d == 0;
            max_d = d > max_d ? d : max_d;
        }
        nv += (long long)sb;
    }
    if (!whole)
        printf("ROI against whole images: not compared (ROI decode off)\n");
    else
        printf("ROI against whole images: %d images, %.3f %% of the values "
               "equal, max |difference| %d levels\n",
               ni, nv ? 100.0 * same / nv : 0, max_d);
    const char *ex = getenv("SL_GPU_CHECK_EXACT");
    if (ex && !strcmp(ex, "1") && whole && (same != nv || ni == 0)) {
        printf("FAIL: ROI and whole decodes differ (SL_GPU_CHECK_EXACT=1)\n");
        rcw = 1;
    }
    if (whole)
        snprintf(jr, sizeof jr,
                 "\"roi_vs_whole\": {\"images\": %d, \"equal_pct\": %.4f, "
                 "\"max_abs\": %d}",
                 ni, nv ? 100.0 * same / nv : 0, max_d);
    else
        snprintf(jr, sizeof jr, "\"roi_vs_whole\": null");
    free(with_roi);
    free(whole);
    free(done_roi);
    free(done_whole);
    sl__xform_t e = x;
    e.mode = SL_XF_CENTER;
    e.resize_size = 256;
    e.flip = 0;
    e.dtype = SL_DTYPE_FLOAT32;
    e.layout = SL_LAYOUT_HWC;
    int rc2 = run_variant("eval_f32_hwc", &e, 1, j2, sizeof j2, NULL, NULL);
    /* Device batches (sl_options_t.device_batches) hold the host batches'
     * bytes: the same stream, left on the GPU. */
    int nh = 0, nd = 0;
    uint64_t dh = loader_digest(argv[1], 0, &nh);
    uint64_t dd = loader_digest(argv[1], 1, &nd);
    int rc3 = !dh || dh != dd || nh != nd;
    printf("device batches: %d samples, digest %016llx; host batches: %d, "
           "%016llx: %s\n",
           nd, (unsigned long long)dd, nh, (unsigned long long)dh,
           rc3 ? "FAIL" : "equal");
    printf("gpu_check: {%s, %s, %s, %s, \"device_batches_equal\": %s}\n", j1,
           jw, jr, j2, rc3 ? "false" : "true");
    return rc || rcw || rc2 || rc3;
}
