/* The real GPU stage (gpu/cuda_stage.c) on a machine without a GPU: over
 * the CUDA runtime and nvJPEG simulated on the CPU (tests/unit/sim_cuda/:
 * host memory, libjpeg-turbo's full decode, gpu/resample.h's loops as the
 * kernels), found through SL_CUDA_LIB_PATH (set by ctest). Since the
 * simulated decoder is the CPU's, the stage must write exactly the CPU
 * path's bytes without DCT scaling: a check of its grouping, planning,
 * slots, threads and copies, not of nvJPEG (tests/gpu/gpu_check.c does that
 * on a GPU). Also: the host-side refusals, the memory budget, concurrent
 * submitters (in the TSan set), and a loader with placement gpu streaming
 * placement cpu's digest. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/rng.h"
#include "gpu/cuda_stage.h"
#include "gpu/rt.h"
#include "ops/image.h"
#include "sluice/testing.h"
#include "testutil.h"

#define OUT 48
#define NIMG 24

typedef struct sample {
    uint8_t *b;
    size_t n;
} sample_t;

static sample_t imgs[NIMG];

static sl__xform_t train_x(void)
{
    sl__xform_t x = {0};
    x.mode = SL_XF_RRC;
    x.scale[0] = 0.08, x.scale[1] = 1;
    x.ratio[0] = 3.0 / 4, x.ratio[1] = 4.0 / 3;
    x.flip = 1;
    x.out_w = x.out_h = OUT;
    x.dtype = SL_DTYPE_UINT8;
    x.layout = SL_LAYOUT_CHW;
    for (int c = 0; c < 3; c++)
        x.mean[c] = 0.5f, x.std[c] = 0.25f;
    return x;
}

/* Synthetic JPEGs of varied sizes (both pass orders occur). */
static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < NIMG; i++) {
        int w = 40 + 37 * (i % 7), h = 30 + 53 * (i % 5);
        uint8_t *rgb = malloc((size_t)w * h * 3);
        for (int k = 0; k < w * h * 3; k++)
            rgb[k] = (uint8_t)(k * 7 + i * 13 + (k / (w * 3)) * 5);
        sl__bytes_t out = {0};
        char err[128];
        if (sl__jpeg_encode(rgb, w, h, 85, &out, err, sizeof err))
            return 1;
        imgs[i].b = out.p;
        imgs[i].n = out.n;
        free(rgb);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NIMG; i++)
        free(imgs[i].b);
    return 0;
}

typedef struct rec {
    atomic_int calls;
    int status;
    char why[160];
} rec_t;

static void on_done(void *ctx, sl__gpu_job_t *job, int status, const char *why)
{
    rec_t *r = (rec_t *)ctx + (intptr_t)job->tag;
    r->status = status;
    snprintf(r->why, sizeof r->why, "%s", why);
    atomic_fetch_add(&r->calls, 1);
}

static sl__gpu_stage_t *make_stage(const sl__xform_t *x, size_t budget)
{
    char err[512];
    sl__gpu_stage_t *st = sl__cuda_stage_create(x, (size_t)OUT * OUT * 3, 0,
                                                budget, err, sizeof err);
    if (!st)
        fail_msg("the stage over the simulated CUDA: %s", err);
    return st;
}

/* A job for image i with the CPU path's draws at (seed 5, sample i). */
static void job_for(const sl__xform_t *x, int i, sl__gpu_job_t *j, void *out)
{
    sl__rng_t c, f;
    sl__rng_init(&c, 5, 0, (uint64_t)i, SL_RNG_CROP);
    sl__rng_init(&f, 5, 0, (uint64_t)i, SL_RNG_FLIP);
    memset(j, 0, sizeof *j);
    char err[128];
    assert_int_equal(sl__image_geometry(imgs[i].b, imgs[i].n, x, &c, &f, j->box,
                                        &j->flip, err, sizeof err),
                     0);
    j->bytes = imgs[i].b;
    j->n = imgs[i].n;
    j->out = out;
    j->tag = (void *)(intptr_t)i;
}

/* Jobs for images 0..NIMG-1 into out (sb bytes each), rec zeroed,
 * submitted in one call and drained. */
static void run_all(sl__gpu_stage_t *st, const sl__xform_t *x,
                    sl__gpu_job_t *jobs, uint8_t *out, size_t sb, rec_t *rec)
{
    sl__gpu_job_t *jp[NIMG];
    memset(rec, 0, NIMG * sizeof *rec);
    for (int i = 0; i < NIMG; i++) {
        job_for(x, i, &jobs[i], out + (size_t)i * sb);
        jp[i] = &jobs[i];
    }
    assert_int_equal(st->submit(st, jp, NIMG, on_done, rec), 0);
    st->drain(st);
}

static void cpu_no_dct(const sl__xform_t *x, int i, uint8_t *out)
{
    sl__rng_t c, f;
    sl__rng_init(&c, 5, 0, (uint64_t)i, SL_RNG_CROP);
    sl__rng_init(&f, 5, 0, (uint64_t)i, SL_RNG_FLIP);
    sl__xform_t xc = *x;
    xc.dct_scale = 0;
    sl__scratch_t *s = sl__scratch_create();
    char err[128];
    assert_int_equal(sl__image_process(imgs[i].b, imgs[i].n, &xc, &c, &f, s,
                                       out, err, sizeof err),
                     0);
    sl__scratch_destroy(s);
}

/* A stage's setting (an environment variable, set from before the stage
 * is made until it is destroyed) and what its ROI counters must end at. */
typedef struct variant {
    const char *env, *val;
    int roi, roi_off; /* sl__cuda_stage_stats_t's */
    int hw, gmax;     /* its backend; groups of at most gmax (0: 128) */
} variant_t;

/* Every image through the stage equals the CPU path without DCT scaling,
 * in every variant: the bitstreams copied to pinned memory (the default)
 * or read where they are (SL_GPU_PAGEABLE_BITS=1); each image decoded to
 * its crop's region (the default over the simulated hardware backend) or
 * whole (SL_GPU_ROI=0), or with nvJPEG refusing the region in the decode
 * or in its parameters (the stage then decodes whole images, the refused
 * group planned again). A PNG and a progressive JPEG are refused with the
 * reason, and counted. */
static void equals_cpu_no_dct(variant_t v)
{
    sl__xform_t x = train_x();
    if (v.env)
        setenv(v.env, v.val, 1);
    sl__gpu_stage_t *st = make_stage(&x, 0);
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG + 2, sb), *want = malloc(sb);
    sl__gpu_job_t jobs[NIMG + 2];
    rec_t rec[NIMG + 2];
    memset(rec, 0, sizeof rec);
    for (int i = 0; i < NIMG; i++) {
        job_for(&x, i, &jobs[i], out + (size_t)i * sb);
        sl__gpu_job_t *jp = &jobs[i];
        assert_int_equal(st->submit(st, &jp, 1, on_done, rec), 0);
    }
    /* A PNG's signature; a baseline JPEG relabelled progressive (SOF2). */
    static const uint8_t png[16] = {0x89, 'P', 'N', 'G', 13, 10, 26, 10};
    uint8_t *prog = malloc(imgs[0].n);
    memcpy(prog, imgs[0].b, imgs[0].n);
    for (size_t k = 2; k + 1 < imgs[0].n; k++)
        if (prog[k] == 0xFF && prog[k + 1] == 0xC0) {
            prog[k + 1] = 0xC2;
            break;
        }
    sl__gpu_job_t *odd[2] = {&jobs[NIMG], &jobs[NIMG + 1]};
    jobs[NIMG] = jobs[0];
    jobs[NIMG].bytes = png, jobs[NIMG].n = sizeof png;
    jobs[NIMG].tag = (void *)(intptr_t)NIMG;
    jobs[NIMG + 1] = jobs[0];
    jobs[NIMG + 1].bytes = prog;
    jobs[NIMG + 1].tag = (void *)(intptr_t)(NIMG + 1);
    assert_int_equal(st->submit(st, odd, 2, on_done, rec), 0);
    st->drain(st);
    for (int i = 0; i < NIMG; i++) {
        assert_int_equal(atomic_load(&rec[i].calls), 1);
        if (rec[i].status != SL__GPU_DONE)
            fail_msg("image %d: status %d: %s", i, rec[i].status, rec[i].why);
        cpu_no_dct(&x, i, want);
        if (memcmp(want, out + (size_t)i * sb, sb))
            fail_msg("image %d: the stage's pixels differ from the CPU path "
                     "without DCT scaling",
                     i);
    }
    assert_int_equal(rec[NIMG].status, SL__GPU_REFUSED);
    assert_non_null(strstr(rec[NIMG].why, "PNG"));
    assert_int_equal(rec[NIMG + 1].status, SL__GPU_REFUSED);
    assert_non_null(strstr(rec[NIMG + 1].why, "progressive"));
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    assert_int_equal(ss.samples, NIMG);
    assert_int_equal(ss.refused, 2);
    assert_true(ss.groups >= 1);
    assert_int_equal(ss.group_max, v.gmax ? v.gmax : SL__GPU_GROUP_MAX);
    assert_true(ss.largest_group >= 1 && ss.largest_group <= ss.group_max);
    assert_int_equal(ss.hw_backend, v.hw);
    assert_int_equal(ss.roi, v.roi);
    assert_int_equal(ss.roi_off, v.roi_off);
    assert_int_equal(ss.roi_samples, v.roi ? NIMG : 0);
    /* Random crops of 8-100 % of each image: its regions are less. */
    if (v.roi)
        assert_true(ss.px_decoded < 0.9 * ss.px_images);
    else
        assert_true(ss.px_decoded == ss.px_images);
    st->destroy(st);
    if (v.env)
        unsetenv(v.env);
    free(prog);
    free(out);
    free(want);
}

static void test_equals_cpu_no_dct(void **state)
{
    (void)state;
    equals_cpu_no_dct((variant_t){NULL, NULL, 1, 0, 1, 0});
    equals_cpu_no_dct((variant_t){"SL_GPU_PAGEABLE_BITS", "1", 1, 0, 1, 0});
    equals_cpu_no_dct((variant_t){"SL_GPU_ROI", "0", 0, 0, 1, 0});
    equals_cpu_no_dct((variant_t){"SIM_NVJPEG_NO_ROI", "1", 0, 9, 1, 0});
    equals_cpu_no_dct((variant_t){"SIM_NVJPEG_NO_ROI", "set", 0, 2, 1, 0});
    equals_cpu_no_dct((variant_t){"SIM_NVJPEG_NO_ROI", "create", 0, 9, 1, 0});
    /* nvJPEG's default backend (no ROI there), and groups of at most 4:
     * bench/gpu's variants for measuring the interference */
    equals_cpu_no_dct((variant_t){"SL_GPU_BACKEND", "default", 0, 0, 0, 0});
    equals_cpu_no_dct((variant_t){"SL_GPU_GROUP", "4", 1, 0, 1, 4});
}

/* A decode that fails for the images' sake (NVJPEG_STATUS_JPEG_NOT_SUPPORTED)
 * refuses the group, for the CPU path, naming the status, and leaves ROI
 * decode on: only a refusal of the region itself turns it off. */
static void test_failed_group_keeps_roi(void **state)
{
    (void)state;
    sl__xform_t x = train_x();
    setenv("SIM_NVJPEG_FAIL", "4", 1);
    sl__gpu_stage_t *st = make_stage(&x, 0);
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG, sb);
    sl__gpu_job_t jobs[NIMG];
    rec_t rec[NIMG];
    memset(rec, 0, sizeof rec);
    for (int i = 0; i < NIMG; i++) {
        job_for(&x, i, &jobs[i], out + (size_t)i * sb);
        sl__gpu_job_t *jp = &jobs[i];
        assert_int_equal(st->submit(st, &jp, 1, on_done, rec), 0);
    }
    st->drain(st);
    for (int i = 0; i < NIMG; i++) {
        assert_int_equal(atomic_load(&rec[i].calls), 1);
        assert_int_equal(rec[i].status, SL__GPU_REFUSED);
        assert_non_null(strstr(rec[i].why, "status 4"));
    }
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    assert_int_equal(ss.refused, NIMG);
    assert_int_equal(ss.roi, 1);
    assert_int_equal(ss.roi_off, 0);
    st->destroy(st);
    unsetenv("SIM_NVJPEG_FAIL");
    free(out);
}

/* The region a crop needs, out to whole MCUs within the image. */
static void test_roi_region(void **state)
{
    (void)state;
    int rx, ry, rw, rh;
    /* 4:2:0 (16 x 16 MCUs): columns 21..120, rows 3..52 of 500 x 375:
     * MCUs 16..127 x 0..63, one more each side, cut at the image's start */
    sl__gpu_roi(500, 375, 16, 16, 21, 3, 100, 50, &rx, &ry, &rw, &rh);
    assert_int_equal(rx, 0);
    assert_int_equal(ry, 0);
    assert_int_equal(rw, 144); /* 0..143 */
    assert_int_equal(rh, 80);  /* 0..79 */
    /* aligned already (4:2:2, 16 x 8): one MCU more on each side */
    sl__gpu_roi(500, 375, 16, 8, 32, 16, 64, 40, &rx, &ry, &rw, &rh);
    assert_int_equal(rx, 16);
    assert_int_equal(ry, 8);
    assert_int_equal(rw, 96); /* 16..111 */
    assert_int_equal(rh, 56); /* 8..63 */
    /* at the far edges: cut to the image, not past it */
    sl__gpu_roi(500, 375, 16, 16, 450, 300, 50, 75, &rx, &ry, &rw, &rh);
    assert_int_equal(rx, 432);
    assert_int_equal(ry, 272);
    assert_int_equal(rw, 68);
    assert_int_equal(rh, 103);
    /* the whole image */
    sl__gpu_roi(500, 375, 8, 8, 0, 0, 500, 375, &rx, &ry, &rw, &rh);
    assert_int_equal(rx, 0);
    assert_int_equal(rw, 500);
    assert_int_equal(rh, 375);
}

/* The hardware decoder's rule, from the header alone. */
static void test_refusal_rule(void **state)
{
    (void)state;
    sl__jpeg_frame_t f = {.sof = 0xC0,
                          .precision = 8,
                          .w = 10,
                          .h = 10,
                          .ncomp = 3,
                          .hs = {2, 1, 1},
                          .vs = {2, 1, 1},
                          .adobe = -1,
                          .scan_comps = 3};
    assert_null(sl__gpu_jpeg_refusal(&f)); /* 4:2:0 baseline */
    sl__jpeg_frame_t g = f;
    g.ncomp = 1;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "grayscale"));
    g = f, g.ncomp = 4;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "CMYK"));
    g = f, g.sof = 0xC2;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "progressive"));
    g = f, g.sof = 0xC9;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "arithmetic"));
    g = f, g.precision = 12;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "8 bits"));
    g = f, g.adobe = 0;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "Adobe RGB"));
    g = f, g.cid[0] = 'R', g.cid[1] = 'G', g.cid[2] = 'B';
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "R, G, B"));
    g.jfif = 1; /* JFIF says YCbCr whatever the names */
    assert_null(sl__gpu_jpeg_refusal(&g));
    g = f, g.scan_comps = 1;
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "interleaved"));
    g = f, g.hs[0] = 4, g.vs[0] = 1; /* 4:1:1 */
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&g), "subsampling"));
    /* and the header walk reads a real file's frame */
    sl__jpeg_frame_t r;
    char err[128];
    assert_int_equal(sl__jpeg_frame(imgs[3].b, imgs[3].n, &r, err, sizeof err),
                     0);
    assert_int_equal(r.sof, 0xC0);
    assert_int_equal(r.ncomp, 3);
    assert_int_equal(r.scan_comps, 3);
    assert_null(sl__gpu_jpeg_refusal(&r));
    /* the same file with its components named R, G, B and its JFIF marker
     * renamed: refused from the bytes */
    uint8_t *rgb = malloc(imgs[3].n);
    memcpy(rgb, imgs[3].b, imgs[3].n);
    int named = 0, unjfif = 0;
    for (size_t k = 2; k + 12 < imgs[3].n && !named; k++) {
        if (rgb[k] == 0xFF && rgb[k + 1] == 0xE0 &&
            !memcmp(rgb + k + 4, "JFIF", 5))
            rgb[k + 4] = 'X', unjfif = 1;
        if (rgb[k] == 0xFF && rgb[k + 1] == 0xC0) {
            for (int c = 0; c < 3; c++)
                rgb[k + 10 + 3 * c] = (uint8_t) "RGB"[c];
            named = 1;
        }
    }
    assert_true(named && unjfif);
    assert_int_equal(sl__jpeg_frame(rgb, imgs[3].n, &r, err, sizeof err), 0);
    assert_int_equal(r.jfif, 0);
    assert_int_equal(r.cid[0], 'R');
    assert_non_null(strstr(sl__gpu_jpeg_refusal(&r), "R, G, B"));
    free(rgb);
}

/* A stage whose slot cannot hold an image refuses it naming the size; a
 * budget too small for any decode is an error at create. */
static void test_budget(void **state)
{
    (void)state;
    sl__xform_t x = train_x();
    char err[512];
    assert_null(sl__cuda_stage_create(&x, (size_t)OUT * OUT * 3, 0,
                                      (size_t)16 << 20, err, sizeof err));
    assert_non_null(strstr(err, "leaves no room to decode"));
    sl__gpu_stage_t *st = make_stage(&x, (size_t)84 << 20);
    int w = 3600, h = 3400; /* 36.7 MB decoded: over the ~34 MiB arena */
    uint8_t *rgb = calloc((size_t)w * h, 3);
    sl__bytes_t big = {0};
    assert_int_equal(sl__jpeg_encode(rgb, w, h, 50, &big, err, sizeof err), 0);
    free(rgb);
    sl__gpu_job_t j = {.bytes = big.p, .n = big.n, .box = {0, 0, 100, 100}};
    uint8_t *out = malloc((size_t)OUT * OUT * 3);
    j.out = out;
    rec_t rec[1];
    memset(rec, 0, sizeof rec);
    sl__gpu_job_t *jp = &j;
    assert_int_equal(st->submit(st, &jp, 1, on_done, rec), 0);
    st->drain(st);
    assert_int_equal(rec[0].status, SL__GPU_REFUSED);
    assert_non_null(strstr(rec[0].why, "MiB of GPU memory"));
    st->destroy(st);
    sl__bytes_free(&big);
    free(out);
}

/* The stage works on its GPU from the caller's thread (create, device
 * batches' memory and copies) and gives the thread its own device back:
 * a trainer's thread on GPU 1 stays there beside a stage on GPU 0. */
static void test_the_callers_device_is_kept(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    setenv("SIM_CUDA_DEVICES", "2", 1);
    assert_int_equal(rt->set_device(1), 0);
    sl__xform_t x = train_x();
    sl__gpu_stage_t *st = make_stage(&x, 0);
    int dev = -1;
    assert_int_equal(rt->get_device(&dev), 0);
    assert_int_equal(dev, 1);
    void *p = st->dev_alloc(st, 4096);
    assert_non_null(p);
    uint8_t host[64] = {1};
    char why[128];
    assert_int_equal(
        st->copy(st, p, host, sizeof host, SL__GPU_COPY_H2D, why, sizeof why),
        0);
    assert_int_equal(rt->get_device(&dev), 0);
    assert_int_equal(dev, 1);
    st->dev_release(st, p, NULL);
    st->dev_free(st, p);
    assert_int_equal(rt->get_device(&dev), 0);
    assert_int_equal(dev, 1);
    int (*wrong)(void) =
        (int (*)(void))dlsym(rt->nvjpeg, "sim_nvjpeg_wrong_device");
    assert_non_null(wrong);
    int was = wrong();
    st->destroy(st); /* nvJPEG undone on device 0, then 1 set back */
    assert_int_equal(wrong(), was);
    assert_int_equal(rt->get_device(&dev), 0);
    assert_int_equal(dev, 1);
    assert_int_equal(rt->set_device(0), 0);
    unsetenv("SIM_CUDA_DEVICES");
}

/* nvJPEG handles are made on the stage's GPU only: the probe made one on
 * whatever device the calling thread had (GPU 0 in every rank whose
 * thread had set none), and on a GPU a handle makes and keeps that
 * device's context, hundreds of MiB. Here a thread on GPU 1 probes and
 * makes a stage on GPU 0 (the process's table counts 1 device, so the
 * stage is on 0 and the thread is the one elsewhere). */
static void *probe_and_stage_on_0(void *arg)
{
    const sl__gpu_rt_t *g = arg;
    if (g->set_device(1))
        return "cannot set GPU 1";
    sl__gpu_rt_t rt;
    sl__gpu_status_t gs;
    if (sl__gpu_rt_load(NULL, &rt, &gs) != 1)
        return "the probe failed";
    sl__gpu_rt_unload(&rt); /* (the process's table keeps them loaded) */
    sl__xform_t x = train_x();
    char err[256];
    sl__gpu_stage_t *st =
        sl__cuda_stage_create(&x, (size_t)OUT * OUT * 3, 0, 0, err, sizeof err);
    if (!st)
        return "no stage on GPU 0";
    st->destroy(st);
    return NULL;
}

static void test_nvjpeg_handles_on_the_stages_gpu_only(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*on)(int) =
        (int (*)(int))(uintptr_t)dlsym(rt->nvjpeg, "sim_nvjpeg_handles_on");
    assert_non_null(on);
    setenv("SIM_CUDA_DEVICES", "2", 1);
    int on0 = on(0), on1 = on(1);
    pthread_t t;
    void *why = NULL;
    assert_int_equal(pthread_create(&t, NULL, probe_and_stage_on_0, (void *)rt),
                     0);
    pthread_join(t, &why);
    unsetenv("SIM_CUDA_DEVICES");
    if (why)
        fail_msg("%s", (const char *)why);
    assert_int_equal(on(1), on1);
    assert_int_equal(on(0), on0 + 1);
}

/* nvJPEG's allocations go through the stage's cache (the simulated
 * nvJPEG stages each group's bitstreams through the extended allocators,
 * on the group's stream, as nvJPEG does): the same group decoded again
 * takes the blocks it gave back, so the cache holds what one group needs
 * however many groups ran; with SL_GPU_NVJPEG_ALLOC=default nvJPEG
 * allocates for itself and the cache holds nothing. Its blocks go back to
 * CUDA with the last stage. */
static void test_nvjpeg_allocations_are_reused(void **state)
{
    (void)state;
    sl__xform_t x = train_x();
    size_t sb = (size_t)OUT * OUT * 3, total = 0;
    uint8_t *out = calloc(NIMG, sb);
    sl__gpu_job_t jobs[NIMG];
    rec_t rec[NIMG];
    for (int i = 0; i < NIMG; i++)
        total += imgs[i].n;
    for (int cached = 1; cached >= 0; cached--) {
        if (!cached)
            setenv("SL_GPU_NVJPEG_ALLOC", "default", 1);
        sl__gpu_stage_t *st = make_stage(&x, 0);
        size_t held = 0;
        for (int round = 0; round < 4; round++) {
            run_all(st, &x, jobs, out, sb, rec);
            for (int i = 0; i < NIMG; i++)
                assert_int_equal(rec[i].status, SL__GPU_DONE);
            size_t now = sl__cuda_stage_nvjpeg_bytes();
            if (round == 0)
                held = now;
            assert_int_equal(now, held); /* reused, none added */
        }
        /* one group of all NIMG: its bitstreams, at most twice over */
        if (cached)
            assert_true(held >= total && held <= 2 * total + 4096);
        else
            assert_int_equal(held, 0);
        st->destroy(st);
        assert_int_equal(sl__cuda_stage_nvjpeg_bytes(), 0);
        unsetenv("SL_GPU_NVJPEG_ALLOC");
    }
    free(out);
}

typedef struct sub_arg {
    sl__gpu_stage_t *st;
    const sl__xform_t *x;
    int who;
    uint8_t *out;
    rec_t *rec;
    sl__gpu_job_t *jobs;
} sub_arg_t;

#define ROUNDS 6

static void *submitter(void *p)
{
    sub_arg_t *a = p;
    size_t sb = (size_t)OUT * OUT * 3;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = a->who; i < NIMG; i += 4) {
            int k = r * NIMG + i;
            job_for(a->x, i, &a->jobs[k], a->out + (size_t)k * sb);
            a->jobs[k].tag = (void *)(intptr_t)k;
            sl__gpu_job_t *jp = &a->jobs[k];
            assert_int_equal(a->st->submit(a->st, &jp, 1, on_done, a->rec), 0);
        }
    return NULL;
}

/* Four threads submitting at once (the loader's decoders do): each job
 * done exactly once, with the CPU path's bytes; with ROI decode, and with
 * nvJPEG refusing it (the first group's jobs then go back to the queue's
 * head while the submitters append). */
static void concurrent_submitters(const char *no_roi)
{
    sl__xform_t x = train_x();
    if (no_roi)
        setenv("SIM_NVJPEG_NO_ROI", no_roi, 1);
    sl__gpu_stage_t *st = make_stage(&x, 0);
    size_t sb = (size_t)OUT * OUT * 3;
    int n = ROUNDS * NIMG;
    uint8_t *out = calloc((size_t)n, sb), *want = malloc(sb);
    rec_t *rec = calloc((size_t)n, sizeof *rec);
    sl__gpu_job_t *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t t[4];
    sub_arg_t args[4];
    for (int k = 0; k < 4; k++) {
        args[k] = (sub_arg_t){st, &x, k, out, rec, jobs};
        pthread_create(&t[k], NULL, submitter, &args[k]);
    }
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    st->drain(st);
    for (int k = 0; k < n; k++) {
        assert_int_equal(atomic_load(&rec[k].calls), 1);
        assert_int_equal(rec[k].status, SL__GPU_DONE);
        cpu_no_dct(&x, k % NIMG, want);
        assert_memory_equal(want, out + (size_t)k * sb, sb);
    }
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    assert_int_equal(ss.samples, n);
    assert_int_equal(ss.roi_off, no_roi ? 9 : 0);
    st->destroy(st);
    if (no_roi)
        unsetenv("SIM_NVJPEG_NO_ROI");
    free(out);
    free(want);
    free(rec);
    free(jobs);
}

static void test_concurrent_submitters(void **state)
{
    (void)state;
    concurrent_submitters(NULL);
    concurrent_submitters("1");
}

/* The loader tests' options: 2 epochs of batches of 6, seed 3. */
static sl_options_t opts(int placement, int share, int no_dct)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 6;
    o.image_size = OUT;
    o.seed = 3;
    o.epochs = 2;
    o.decode_threads = 2;
    o.placement = placement;
    o.gpu_share = share;
    o.no_dct_scale = no_dct;
    return o;
}

static uint64_t digest(const char *root, int placement, int share, int no_dct,
                       int *on_gpu)
{
    sl_options_t o = opts(placement, share, no_dct);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    *on_gpu = sl__testing_placement(l, NULL);
    int64_t n = 0;
    uint64_t d = tu_stream_digest(l, &n);
    assert_int_equal(n, 2 * 20);
    sl_loader_destroy(l);
    return d;
}

/* The loader with placement gpu over the simulated stage streams placement
 * cpu's digest without DCT scaling, every sample or half of each batch. */
static void test_loader_placement_gpu(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim", 2, 10, 90, 70);
    int g = -1;
    uint64_t want = digest(root, SL_PLACEMENT_CPU, 0, 1, &g);
    assert_int_equal(g, 0);
    assert_int_equal(digest(root, SL_PLACEMENT_GPU, 0, 0, &g), want);
    assert_int_equal(g, 1);
    assert_int_equal(digest(root, SL_PLACEMENT_AUTO, 500, 1, &g), want);
    assert_int_equal(g, 1);
    /* a share out of range after the stage was made: refused, and the
     * stage goes with the loader */
    sl_options_t o;
    sl_options_init(&o);
    o.placement = SL_PLACEMENT_GPU;
    o.gpu_share = 2000;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_null(l);
    assert_int_equal(sl__cuda_stage_count(), 0);
    /* a device this machine does not have: refused, naming it */
    o.gpu_share = 0;
    o.gpu_device = 1;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_loader_last_error(NULL),
                           "gpu_device 1: this machine has 1 CUDA device"));
    o.gpu_device = -1;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "gpu_device -1"));
    tu_rmtree(root);
    free(root);
}

/* A stream's digest with device batches (on_error skip), each batch's
 * data checked to be device memory of device 0 (the simulated runtime's
 * is host memory: readable here). */
static uint64_t digest_dev(const char *root, int placement, int share,
                           int64_t *n)
{
    sl_options_t o = opts(placement, share, 1);
    o.on_error = SL_ON_ERROR_SKIP;
    o.device_batches = 1;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    *n = 0;
    while (sl_loader_next(l, &b) == 0) {
        assert_int_equal(b->device, 0);
        XXH3_64bits_update(h, b->data, (size_t)b->n * b->sample_bytes);
        XXH3_64bits_update(h, b->labels, (size_t)b->n * sizeof(int64_t));
        XXH3_64bits_update(h, b->indices, (size_t)b->n * sizeof(int64_t));
        *n += b->n;
        sl_loader_release(l, b);
    }
    uint64_t d = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    sl_loader_destroy(l);
    return d;
}

/* Device batches: the stream of host batches whatever the share (the
 * GPU's samples written in place, the CPU's copied in when the batch is
 * complete), a skipped sample compacted on the device, host batches say
 * device -1, and without the stage they are refused naming why. */
static void test_device_batches(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim_dev", 2, 10, 90, 70);
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/c0/zz_bad.jpg", root);
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fputs("\xff\xd8 not a jpeg", f);
    fclose(f);
    sl_options_t o = opts(SL_PLACEMENT_CPU, 0, 1);
    o.on_error = SL_ON_ERROR_SKIP;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t want_n = 0;
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    assert_int_equal(sl_loader_next(l, &b), 0);
    assert_int_equal(b->device, -1); /* host batches say so */
    sl_loader_release(l, b);
    sl_loader_destroy(l);
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    uint64_t want = tu_stream_digest(l, &want_n);
    sl_loader_destroy(l);
    assert_int_equal(want_n, 2 * 20); /* 21 files, the bad one skipped */
    int64_t n = 0;
    assert_int_equal(digest_dev(root, SL_PLACEMENT_GPU, 0, &n), want);
    assert_int_equal(n, want_n);
    assert_int_equal(digest_dev(root, SL_PLACEMENT_GPU, 500, &n), want);
    assert_int_equal(digest_dev(root, SL_PLACEMENT_AUTO, 0, &n), want);
    /* placement cpu: no device memory to put them in */
    o.device_batches = 1;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_loader_last_error(NULL),
                           "device_batches: the GPU stage is not in use"));
    o.device_batches = 2;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_int_equal(sl__cuda_stage_count(), 0);
    tu_rmtree(root);
    free(root);
}

/* A lowered prefetch depth with device batches frees no device memory
 * while the loader runs: on a GPU a cudaFree waits for the whole device,
 * the training step's work too (a bubble on the trainer's thread, whose
 * release drops the buffer, or the scheduler's, whose set does). The
 * buffers are parked, taken back by a raise, freed at destroy; the
 * stream is the same. */
static void test_lowered_depth_frees_no_device_memory(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim_park", 2, 10, 90, 70);
    int64_t want_n = 0;
    uint64_t want = digest_dev(root, SL_PLACEMENT_GPU, 0, &want_n);
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    int (*frees)(void) =
        (int (*)(void))(uintptr_t)dlsym(rt->cudart, "sim_cuda_frees");
    assert_non_null(frees);
    sl_options_t o = opts(SL_PLACEMENT_GPU, 0, 1);
    o.on_error = SL_ON_ERROR_SKIP;
    o.device_batches = 1;
    o.prefetch = 4;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    int before = frees();
    const sl_batch_t *b[2];
    int64_t n = 0;
    for (int k = 0; sl_loader_next(l, &b[k % 2]) == 0; k++) {
        const sl_batch_t *c = b[k % 2];
        XXH3_64bits_update(h, c->data, (size_t)c->n * c->sample_bytes);
        XXH3_64bits_update(h, c->labels, (size_t)c->n * sizeof(int64_t));
        XXH3_64bits_update(h, c->indices, (size_t)c->n * sizeof(int64_t));
        n += c->n;
        if (k == 1) { /* two held: the scheduler lowers the depth, and
                         the releases drop what it could not */
            assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 1), 0);
            sl_loader_release(l, b[0]);
        }
        if (k > 0)
            sl_loader_release(l, c);
        if (k == 4) /* raised: the parked ones back */
            assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 4), 0);
    }
    assert_int_equal(frees(), before);
    sl_loader_destroy(l);
    assert_true(frees() > before); /* at destroy */
    assert_int_equal(XXH3_64bits_digest(h), want);
    assert_int_equal(n, want_n);
    XXH3_freeState(h);
    tu_rmtree(root);
    free(root);
}

/* A device batch released while its consumer's GPU work may still read
 * it (the simulated runtime holds the events of the consumer's stream:
 * the trainer's kernels still queued) is not written again until that
 * work is done: the stage's writes into the buffer wait for the release's
 * fence (kernels for the GPU's share, copies for the CPU's), and the
 * stream is unchanged. Two buffers: with both batches held the loader is
 * idle; releasing the first lets it claim that buffer for the next batch.
 * The consumer's stream: the legacy default one (sl_loader_release), or
 * one of its own (sl_loader_release_on; holding the legacy one then
 * holds nothing of it). */
static void device_batch_fence(int own_stream)
{
    char *root = tu_jpeg_tree("gpu_cuda_sim_fence", 2, 12, 90, 70);
    sl_options_t o = opts(SL_PLACEMENT_CPU, 0, 1);
    o.policy = SL_POLICY_STATIC;
    o.prefetch = 2;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t want_n = 0;
    uint64_t want = tu_stream_digest(l, &want_n);
    sl_loader_destroy(l);
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*hold_on)(void *, int) =
        (int (*)(void *, int))dlsym(rt->cudart, "sim_cuda_hold_on");
    assert_non_null(hold_on);
    void *stream = NULL;
    if (own_stream)
        assert_int_equal(rt->stream_create(&stream, 1), 0);
    for (int share = 500; share <= 1000; share += 500) {
        o = opts(SL_PLACEMENT_AUTO, share, 1);
        o.policy = SL_POLICY_STATIC;
        o.prefetch = 2;
        o.device_batches = 1;
        assert_int_equal(sl_loader_create(root, &o, &l), 0);
        assert_int_equal(sl_loader_start(l, NULL), 0);
        XXH3_state_t *h = XXH3_createState();
        XXH3_64bits_reset(h);
        const sl_batch_t *b[2];
        int64_t n = 0;
        for (int k = 0; k < 2; k++) {
            assert_int_equal(sl_loader_next(l, &b[k]), 0);
            XXH3_64bits_update(h, b[k]->data,
                               (size_t)b[k]->n * b[k]->sample_bytes);
            XXH3_64bits_update(h, b[k]->labels,
                               (size_t)b[k]->n * sizeof(int64_t));
            XXH3_64bits_update(h, b[k]->indices,
                               (size_t)b[k]->n * sizeof(int64_t));
            n += b[k]->n;
        }
        size_t bytes = (size_t)b[0]->n * b[0]->sample_bytes;
        uint8_t *was = malloc(bytes), *buf = b[0]->data;
        memcpy(was, buf, bytes);
        hold_on(stream, 1);
        assert_int_equal(own_stream ? sl_loader_release_on(l, b[0], stream)
                                    : sl_loader_release(l, b[0]),
                         0);
        usleep(300 * 1000); /* the loader claims the buffer meanwhile */
        int kept = !memcmp(buf, was, bytes); /* not written under it */
        int fences = hold_on(stream, 0);     /* (before asserting: a hold left
                                                on would hang later tests) */
        assert_true(kept);
        assert_true(fences >= 1); /* the release recorded its fence */
        assert_int_equal(sl_loader_release(l, b[1]), 0);
        const sl_batch_t *c;
        while (sl_loader_next(l, &c) == 0) {
            XXH3_64bits_update(h, c->data, (size_t)c->n * c->sample_bytes);
            XXH3_64bits_update(h, c->labels, (size_t)c->n * sizeof(int64_t));
            XXH3_64bits_update(h, c->indices, (size_t)c->n * sizeof(int64_t));
            n += c->n;
            sl_loader_release_on(l, c, stream);
        }
        assert_int_equal(n, want_n);
        assert_true(XXH3_64bits_digest(h) == want);
        XXH3_freeState(h);
        free(was);
        sl_loader_destroy(l);
    }
    if (stream)
        rt->stream_destroy(stream);
    assert_int_equal(sl__cuda_stage_count(), 0);
    tu_rmtree(root);
    free(root);
}

static void test_device_batch_waits_for_its_consumer(void **state)
{
    (void)state;
    device_batch_fence(0);
}

static void test_device_batch_fenced_on_the_consumers_stream(void **state)
{
    (void)state;
    device_batch_fence(1);
}

/* A consumer's stream on another GPU than the stage's (its trainer's
 * thread on GPU 1): the fence is an event of that GPU, which the stage's
 * streams wait for on the GPU; the host never waits for the stream, the
 * buffer is not written while the consumer's work is held, and the
 * failed record on the stage's event leaves no error for the caller's
 * next check (torch's: "invalid resource handle"). */
static void test_release_on_another_devices_stream(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim_fence2", 2, 6, 90, 70);
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*syncs)(void *) =
        (int (*)(void *))(uintptr_t)dlsym(rt->cudart, "sim_cuda_stream_syncs");
    int (*last)(void) =
        (int (*)(void))(uintptr_t)dlsym(rt->cudart, "sim_cuda_last_error");
    int (*hold_on)(void *, int) =
        (int (*)(void *, int))(uintptr_t)dlsym(rt->cudart, "sim_cuda_hold_on");
    assert_true(syncs && last && hold_on);
    setenv("SIM_CUDA_DEVICES", "2", 1);
    int dev = -1;
    assert_int_equal(rt->get_device(&dev), 0);
    assert_int_equal(rt->set_device(1), 0); /* the trainer's thread */
    void *other = NULL;
    assert_int_equal(rt->stream_create(&other, 1), 0);
    sl_options_t o = opts(SL_PLACEMENT_GPU, 1000, 1);
    o.policy = SL_POLICY_STATIC;
    o.device_batches = 1;
    o.prefetch = 2;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b[2];
    int64_t n = 0;
    for (int k = 0; k < 2; k++) { /* both held: the loader is idle */
        assert_int_equal(sl_loader_next(l, &b[k]), 0);
        n += b[k]->n;
    }
    size_t bytes = (size_t)b[0]->n * b[0]->sample_bytes;
    uint8_t *was = malloc(bytes), *buf = b[0]->data;
    memcpy(was, buf, bytes);
    hold_on(other, 1);
    assert_int_equal(sl_loader_release_on(l, b[0], other), 0);
    int err = last();
    usleep(300 * 1000); /* the loader claims the buffer meanwhile */
    int kept = !memcmp(buf, was, bytes);
    int fences = hold_on(other, 0);
    assert_int_equal(err, 0);
    assert_true(kept);
    assert_int_equal(fences, 1);
    assert_int_equal(sl_loader_release_on(l, b[1], other), 0);
    const sl_batch_t *c;
    while (sl_loader_next(l, &c) == 0) {
        n += c->n;
        assert_int_equal(sl_loader_release_on(l, c, other), 0);
        assert_int_equal(last(), 0);
    }
    assert_int_equal(syncs(other), 0); /* the host never waited */
    assert_int_equal(n, 2 * 6 * o.epochs);
    sl_loader_destroy(l);
    rt->stream_destroy(other);
    assert_int_equal(rt->set_device(dev), 0);
    unsetenv("SIM_CUDA_DEVICES");
    free(was);
    tu_rmtree(root);
    free(root);
}

static void *release_first(void *arg)
{
    void **a = arg;
    sl_loader_release(a[0], a[1]);
    return NULL;
}
static void *get_prefetch(void *arg)
{
    int64_t v = 0;
    sl_loader_get(arg, SL_PARAM_PREFETCH, &v);
    return NULL;
}

/* A device batch's release records its fence out of the loader's lock,
 * which every reader and decoder needs (and a Python trainer holds the
 * GIL through it): with the simulated runtime's event records blocked,
 * as a driver's full queue would block them, a release in progress
 * leaves the loader's other calls free. */
static void test_release_fences_out_of_the_lock(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim_fence3", 2, 6, 90, 70);
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    void (*stall)(int) =
        (void (*)(int))(uintptr_t)dlsym(rt->cudart, "sim_cuda_stall_records");
    int (*stalled)(void) =
        (int (*)(void))(uintptr_t)dlsym(rt->cudart, "sim_cuda_stalled");
    assert_true(stall && stalled);
    sl_options_t o = opts(SL_PLACEMENT_GPU, 1000, 1);
    o.policy = SL_POLICY_STATIC;
    o.device_batches = 1;
    o.prefetch = 2;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b[2];
    for (int k = 0; k < 2; k++) /* both held: the loader is idle */
        assert_int_equal(sl_loader_next(l, &b[k]), 0);
    stall(1);
    void *args[2] = {l, (void *)b[0]};
    pthread_t rel, get;
    assert_int_equal(pthread_create(&rel, NULL, release_first, args), 0);
    for (int t = 0; t < 2000 && stalled() < 1; t++)
        usleep(1000);
    int in_record = stalled();
    assert_int_equal(pthread_create(&get, NULL, get_prefetch, l), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    int free_meanwhile = pthread_timedjoin_np(get, NULL, &until) == 0;
    stall(0);
    pthread_join(rel, NULL);
    if (!free_meanwhile)
        pthread_join(get, NULL);
    assert_int_equal(in_record, 1);
    assert_true(free_meanwhile);
    assert_int_equal(sl_loader_release(l, b[1]), 0);
    const sl_batch_t *c;
    while (sl_loader_next(l, &c) == 0)
        sl_loader_release(l, c);
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

/* The kernels are loaded the way the runtime allows: its library API
 * (sim/, a CUDA 13 runtime), or the driver's module API where the runtime
 * lacks it (sim12/, a 12.x runtime from before 12.8: SL_TEST_KERNELS=
 * module), and every other test of this file ran through that way: the
 * driver's launches count them. */
static void test_kernels_loaded_as_the_runtime_allows(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    const char *want = getenv("SL_TEST_KERNELS");
    int module = want && !strcmp(want, "module");
    assert_int_equal(sl__gpu_rt_kernels(rt),
                     module ? SL__GPU_KERNELS_MODULE : SL__GPU_KERNELS_LIBRARY);
    assert_non_null(rt->driver); /* the runtime loaded it: both kinds */
    int (*launches)(void) =
        (int (*)(void))dlsym(rt->driver, "sim_driver_launches");
    assert_non_null(launches);
    if (module)
        assert_true(launches() > 0);
    else
        assert_int_equal(launches(), 0);
}

/* A memory budget pays for the stage's pinned memory: fewer batch
 * buffers fit beside it than on the CPU, and a budget that holds none
 * beside it fails placement gpu and sends auto to the CPU, naming it. */
static void test_memory_budget_pays_for_pinned_memory(void **state)
{
    (void)state;
    /* 64 samples: a buffer holds a whole batch_size batch (it holds at
     * most the samples there are) */
    char *root = tu_jpeg_tree("gpu_cuda_sim_mem", 2, 32, 90, 70);
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 64;
    o.image_size = 224; /* 9.6 MB a batch; the stage pins ~115 MB */
    o.max_memory_bytes = (int64_t)256 << 20;
    int64_t lo = 0, hi_cpu = 0, hi_gpu = 0;
    sl_loader_t *l = NULL;
    o.placement = SL_PLACEMENT_CPU;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi_cpu),
                     0);
    sl_loader_destroy(l);
    o.placement = SL_PLACEMENT_GPU;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi_gpu),
                     0);
    sl_loader_destroy(l);
    assert_true(hi_gpu >= 1 && hi_gpu < hi_cpu);
    /* 160 MB: working memory takes 40 MB, the rest is 12 batches on the
     * CPU but not one beside the stage's pinned slots */
    o.max_memory_bytes = (int64_t)160 << 20;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_ERANGE);
    assert_non_null(
        strstr(sl_loader_last_error(NULL), "placement gpu: the memory budget"));
    assert_non_null(strstr(sl_loader_last_error(NULL), "pinned memory"));
    /* auto, the share the scheduler's (the simulated NVML shows a GPU) */
    o.placement = SL_PLACEMENT_AUTO;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    const char *why = NULL;
    assert_int_equal(sl__testing_placement(l, &why), 0);
    assert_non_null(strstr(why, "beside the GPU stage's"));
    sl_loader_destroy(l);
    assert_int_equal(sl__cuda_stage_count(), 0);
    tu_rmtree(root);
    free(root);
}

/* gpu_memory_bytes: the stage's slots within it (all of it, or half with
 * device batches), the device batches in the rest (prefetch capped for
 * everyone); a budget the stage cannot decode in, or with no room for a
 * device batch beside it, fails placement gpu naming the sizes and sends
 * auto to the CPU saying why. */
static void test_gpu_memory_budget(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_cuda_sim_gmem", 2, 32, 90, 70);
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 64;
    o.image_size = 224; /* 9.6 MB a batch */
    o.decode_threads = 2;
    o.placement = SL_PLACEMENT_GPU;
    o.device_batches = 1;
    sl_loader_t *l = NULL;
    int64_t lo = 0, hi = 0, hi0 = 0;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi0), 0);
    sl_loader_destroy(l);
    /* 250 MiB: the stage 125, the rest 13 device batches */
    o.gpu_memory_bytes = (int64_t)250 << 20;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi), 0);
    int64_t batch = 64LL * 224 * 224 * 3;
    assert_int_equal(hi, (((int64_t)125 << 20)) / batch);
    assert_true(hi < hi0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, hi + 1), SL_ERANGE);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b = NULL;
    assert_int_equal(sl_loader_next(l, &b), 0);
    assert_int_equal(b->device, 0);
    sl_loader_release(l, b);
    sl_loader_destroy(l);
    /* 100 MiB: without device batches the stage decodes in all of it; with
     * them its 50 MiB leave no room to decode */
    o.gpu_memory_bytes = (int64_t)100 << 20;
    o.device_batches = 0;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_loader_destroy(l);
    o.device_batches = 1;
    assert_int_not_equal(sl_loader_create(root, &o, &l), 0);
    assert_non_null(strstr(sl_loader_last_error(NULL), "no room to decode"));
    /* Batches of 64 samples of 1100 x 1100 (232 MB; a buffer holds the
     * samples there are, so the batch is made large by its samples):
     * 400 MiB leave the stage 200 and the batches 200 (221 MiB): none
     * fits. gpu fails; auto goes to the CPU (and device batches cannot be
     * had) */
    o.image_size = 1100;
    o.batch_size = 64;
    o.gpu_memory_bytes = (int64_t)400 << 20;
    int rc = sl_loader_create(root, &o, &l);
    if (rc != SL_ERANGE)
        fail_msg("%d: %s", rc, sl_loader_last_error(NULL));
    assert_non_null(
        strstr(sl_loader_last_error(NULL), "placement gpu: gpu_memory_bytes"));
    assert_non_null(strstr(sl_loader_last_error(NULL), "no device batch"));
    o.placement = SL_PLACEMENT_AUTO;
    o.device_batches = 0;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_loader_destroy(l); /* no device batches asked: the stage stays */
    o.device_batches = 1;
    assert_int_not_equal(sl_loader_create(root, &o, &l), 0);
    assert_non_null(strstr(sl_loader_last_error(NULL), "device_batches"));
    assert_non_null(strstr(sl_loader_last_error(NULL), "no device batch"));
    o.gpu_memory_bytes = -1;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "gpu_memory_bytes"));
    assert_int_equal(sl__cuda_stage_count(), 0);
    tu_rmtree(root);
    free(root);
}

/* An entry the simulated libraries export for tests. */
static void *sim_sym(void *lib, const char *name)
{
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f)
        fail_msg("the simulated CUDA lacks %s", name);
    return f;
}

/* Image i with a comment that makes it one the simulated hardware decoder
 * does not take (sim_nvjpeg.c): its pixels are image i's. */
static sample_t hw_unsupported(int i)
{
    static const char tag[] = "sim:hw-unsupported";
    size_t k = sizeof tag - 1;
    sample_t m = {malloc(imgs[i].n + 4 + k), imgs[i].n + 4 + k};
    memcpy(m.b, imgs[i].b, 2); /* SOI */
    m.b[2] = 0xFF, m.b[3] = 0xFE, m.b[4] = 0, m.b[5] = (uint8_t)(2 + k);
    memcpy(m.b + 6, tag, k);
    memcpy(m.b + 6 + k, imgs[i].b + 2, imgs[i].n - 2);
    return m;
}

/* The process's table as an nvJPEG from before the per-image check and
 * the preallocation (11.6) has it, for the stages made until restored. */
static sl__gpu_rt_t older_nvjpeg(void)
{
    sl__gpu_rt_t *rt = (sl__gpu_rt_t *)sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    sl__gpu_rt_t saved = *rt;
    rt->nvjpeg_batched_supported_ex = NULL;
    rt->nvjpeg_stream_parse_header = NULL;
    rt->nvjpeg_batched_prealloc = NULL;
    return saved;
}

/* Every image and the marked one, submitted as one group: rec[NIMG] is
 * the marked one's. Returns the stage's stats. */
static sl__cuda_stage_stats_t group_with_unsupported(uint8_t *out, rec_t *rec)
{
    sl__xform_t x = train_x();
    size_t sb = (size_t)OUT * OUT * 3;
    sample_t m = hw_unsupported(5);
    sl__gpu_stage_t *st = make_stage(&x, 0);
    sl__gpu_job_t jobs[NIMG + 1], *jp[NIMG + 1];
    memset(rec, 0, (NIMG + 1) * sizeof *rec);
    for (int i = 0; i <= NIMG; i++) {
        job_for(&x, i < NIMG ? i : 5, &jobs[i], out + (size_t)i * sb);
        jobs[i].tag = (void *)(intptr_t)i;
        jp[i] = &jobs[i];
    }
    jobs[NIMG].bytes = m.b, jobs[NIMG].n = m.n;
    assert_int_equal(st->submit(st, jp, NIMG + 1, on_done, rec), 0);
    st->drain(st);
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    st->destroy(st);
    free(m.b);
    for (int i = 0; i <= NIMG; i++)
        assert_int_equal(atomic_load(&rec[i].calls), 1);
    return ss;
}

/* An image the hardware decoder does not take, though the header rule
 * passes it, is asked about before the batch
 * (nvjpegDecodeBatchedSupportedEx) and refused alone, for the CPU path,
 * counted; the rest of its group decodes. Without the check (an older
 * nvJPEG) the whole group is refused, as before: nothing is lost. The
 * default backend, which takes it, is not asked. */
static void test_hw_unsupported_image_refused_alone(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*checks)(void) =
        (int (*)(void))sim_sym(rt->nvjpeg, "sim_nvjpeg_checks");
    sl__xform_t x = train_x();
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG + 1, sb), *want = malloc(sb);
    rec_t rec[NIMG + 1];
    int c0 = checks();
    sl__cuda_stage_stats_t ss = group_with_unsupported(out, rec);
    for (int i = 0; i < NIMG; i++) {
        if (rec[i].status != SL__GPU_DONE)
            fail_msg("image %d: status %d: %s", i, rec[i].status, rec[i].why);
        cpu_no_dct(&x, i, want);
        assert_memory_equal(want, out + (size_t)i * sb, sb);
    }
    assert_int_equal(rec[NIMG].status, SL__GPU_REFUSED);
    assert_non_null(strstr(rec[NIMG].why, "hardware JPEG decoder"));
    assert_int_equal(ss.hw_check, 1);
    assert_int_equal(ss.hw_check_off, 0);
    assert_int_equal(ss.hw_unsupported, 1);
    assert_int_equal(ss.refused, 1);
    assert_true(checks() - c0 >= NIMG + 1);

    sl__gpu_rt_t saved = older_nvjpeg();
    ss = group_with_unsupported(out, rec);
    *(sl__gpu_rt_t *)sl__gpu_rt_get(NULL) = saved;
    for (int i = 0; i <= NIMG; i++) {
        assert_int_equal(rec[i].status, SL__GPU_REFUSED);
        assert_non_null(strstr(rec[i].why, "status 4"));
    }
    assert_int_equal(ss.hw_check, 0);
    assert_int_equal(ss.refused, NIMG + 1);

    setenv("SL_GPU_BACKEND", "default", 1);
    c0 = checks();
    ss = group_with_unsupported(out, rec);
    unsetenv("SL_GPU_BACKEND");
    for (int i = 0; i <= NIMG; i++)
        assert_int_equal(rec[i].status, SL__GPU_DONE);
    cpu_no_dct(&x, 5, want);
    assert_memory_equal(want, out + (size_t)NIMG * sb, sb);
    assert_int_equal(ss.hw_check, 0);
    assert_int_equal(checks(), c0);
    free(out);
    free(want);
}

/* One group of every image through a new stage; its stats. */
static sl__cuda_stage_stats_t one_group(void)
{
    sl__xform_t x = train_x();
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG, sb);
    sl__gpu_job_t jobs[NIMG];
    rec_t rec[NIMG];
    sl__gpu_stage_t *st = make_stage(&x, 0);
    run_all(st, &x, jobs, out, sb, rec);
    for (int i = 0; i < NIMG; i++)
        assert_int_equal(rec[i].status, SL__GPU_DONE);
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    st->destroy(st);
    free(out);
    return ss;
}

/* The hardware backend's buffers are allocated at create for a full group
 * (nvjpegDecodeBatchedPreAllocate, both slots' states), so the first
 * groups of photos up to 512 x 512 do not grow them; SL_GPU_PREALLOC=WxH
 * sizes it, =0 skips it; the default backend and an nvJPEG without it
 * skip it too. */
static void test_hw_buffers_preallocated(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*pre)(int *, int *, int *, int *) =
        (int (*)(int *, int *, int *, int *))sim_sym(rt->nvjpeg,
                                                     "sim_nvjpeg_prealloc");
    int (*grows)(void) = (int (*)(void))sim_sym(rt->nvjpeg, "sim_nvjpeg_grows");
    int b, w, h, css;
    int p0 = pre(&b, &w, &h, &css), g0 = grows();
    sl__cuda_stage_stats_t ss = one_group();
    assert_int_equal(pre(&b, &w, &h, &css), p0 + 2);
    assert_int_equal(b, SL__GPU_GROUP_MAX);
    assert_int_equal(w, 512);
    assert_int_equal(h, 512);
    assert_int_equal(css, 0); /* NVJPEG_CSS_444 */
    assert_int_equal(ss.prealloc_w, 512);
    assert_int_equal(ss.prealloc_err, 0);
    assert_int_equal(grows(), g0); /* the group fitted */
    setenv("SL_GPU_PREALLOC", "64x48", 1);
    p0 = pre(&b, &w, &h, &css);
    ss = one_group();
    assert_int_equal(pre(&b, &w, &h, &css), p0 + 2);
    assert_int_equal(w * 1000 + h, 64048);
    assert_true(grows() > g0); /* larger images: grown at decode */
    const char *off[][2] = {{"SL_GPU_PREALLOC", "0"},
                            {"SL_GPU_BACKEND", "default"}};
    for (int k = 0; k < 2; k++) {
        unsetenv("SL_GPU_PREALLOC");
        setenv(off[k][0], off[k][1], 1);
        p0 = pre(&b, &w, &h, &css);
        ss = one_group();
        assert_int_equal(pre(&b, &w, &h, &css), p0);
        assert_int_equal(ss.prealloc_w, 0);
        unsetenv(off[k][0]);
    }
    sl__gpu_rt_t saved = older_nvjpeg();
    p0 = pre(&b, &w, &h, &css);
    ss = one_group();
    *(sl__gpu_rt_t *)sl__gpu_rt_get(NULL) = saved;
    assert_int_equal(pre(&b, &w, &h, &css), p0);
    assert_int_equal(ss.prealloc_w, 0);
}

/* Both kernels are loaded at create (each launched once, timed in
 * load_s), not at the first group's launch, which CUDA's lazy loading
 * would otherwise make pay for it: the simulated runtime loads a
 * library's kernels at their first launch, the driver a module's at
 * cuModuleGetFunction. */
static void test_kernels_loaded_at_create(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int module = sl__gpu_rt_kernels(rt) == SL__GPU_KERNELS_MODULE;
    int (*loaded)(void) = (int (*)(void))sim_sym(
        module ? rt->driver : rt->cudart,
        module ? "sim_driver_kernels_loaded" : "sim_cuda_kernels_loaded");
    sl__xform_t x = train_x();
    sl__gpu_stage_t *st = make_stage(&x, 0);
    assert_int_equal(loaded(), 3);
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    assert_true(ss.load_s > 0 && ss.load_s < 60);
    assert_int_equal(ss.groups, 0);
    st->destroy(st);
}

/* A kernel launch that fails is named once, with where: at create (the
 * warm-up launch) the stage is not made; in a group, the group is refused
 * for the CPU path and the next group runs. */
static void test_launch_failure_named(void **state)
{
    (void)state;
    sl__xform_t x = train_x();
    char err[512];
    setenv("SIM_CUDA_LAUNCH_FAIL", "2", 1);
    sl__gpu_stage_t *st =
        sl__cuda_stage_create(&x, (size_t)OUT * OUT * 3, 0, 0, err, sizeof err);
    assert_null(st);
    assert_non_null(strstr(err, "GPU stage: loading the kernels: "));
    assert_null(strstr(err + 1, "GPU stage")); /* the prefix once */
    assert_int_equal(sl__cuda_stage_count(), 0);
    /* the first group's first launch (3), in groups of 4 */
    setenv("SIM_CUDA_LAUNCH_FAIL", "3", 1);
    setenv("SL_GPU_GROUP", "4", 1);
    st = make_stage(&x, 0);
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG, sb);
    sl__gpu_job_t jobs[NIMG];
    rec_t rec[NIMG];
    run_all(st, &x, jobs, out, sb, rec);
    int refused = 0, done = 0;
    for (int i = 0; i < NIMG; i++) {
        assert_int_equal(atomic_load(&rec[i].calls), 1);
        if (rec[i].status == SL__GPU_REFUSED) {
            refused++;
            assert_non_null(strstr(rec[i].why, "GPU stage: kernels: "));
            assert_null(strstr(rec[i].why + 1, "GPU stage"));
        } else {
            done += rec[i].status == SL__GPU_DONE;
        }
    }
    assert_int_equal(refused, 4);
    assert_int_equal(done, NIMG - 4);
    st->destroy(st);
    unsetenv("SL_GPU_GROUP");
    unsetenv("SIM_CUDA_LAUNCH_FAIL");
    free(out);
}

/* nvJPEG's stream-less calls (a batched initialise, a state's destroy)
 * and the frees they make through the stage's allocator are ordered
 * after the stage's work: the simulated nvJPEG counts those made while
 * the state's stream has work the host has not seen finish (as after a
 * failed group, whose queued copies the stage now waits for), the
 * simulated runtime every use of the legacy default stream (the trainer's
 * in PyTorch: a free with no stream must not record its event there or
 * synchronise it) and every stream destroyed busy. A failed group (the
 * hardware decoder refusing one image, without the per-image check) then
 * a good one on the same slot, then destroy. */
static void test_nvjpeg_frees_follow_the_stages_work(void **state)
{
    (void)state;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    assert_non_null(rt);
    int (*busy)(void) = (int (*)(void))sim_sym(rt->nvjpeg, "sim_nvjpeg_busy");
    int (*legacy)(void) =
        (int (*)(void))sim_sym(rt->cudart, "sim_cuda_legacy_uses");
    int (*busy_destroys)(void) =
        (int (*)(void))sim_sym(rt->cudart, "sim_cuda_busy_destroys");
    int b0 = busy(), l0 = legacy(), d0 = busy_destroys();
    sl__xform_t x = train_x();
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = calloc(NIMG + 1, sb);
    rec_t rec[NIMG + 1];
    sample_t m = hw_unsupported(5);
    sl__gpu_job_t jobs[NIMG + 1], *jp[NIMG + 1];
    sl__gpu_rt_t saved = older_nvjpeg();
    sl__gpu_stage_t *st = make_stage(&x, 0);
    for (int round = 0; round < 2; round++) {
        int n = round ? NIMG : NIMG + 1; /* the marked image: first round */
        memset(rec, 0, sizeof rec);
        for (int i = 0; i < n; i++) {
            job_for(&x, i < NIMG ? i : 5, &jobs[i], out + (size_t)i * sb);
            jobs[i].tag = (void *)(intptr_t)i;
            jp[i] = &jobs[i];
        }
        jobs[NIMG].bytes = m.b, jobs[NIMG].n = m.n;
        assert_int_equal(st->submit(st, jp, n, on_done, rec), 0);
        st->drain(st);
        for (int i = 0; i < n; i++)
            assert_int_equal(rec[i].status,
                             round ? SL__GPU_DONE : SL__GPU_REFUSED);
    }
    sl__cuda_stage_stats_t ss;
    sl__cuda_stage_stats(st, &ss);
    assert_int_equal(ss.refused, NIMG + 1);
    assert_int_equal(ss.samples, NIMG);
    st->destroy(st);
    *(sl__gpu_rt_t *)sl__gpu_rt_get(NULL) = saved;
    assert_int_equal(busy(), b0);
    assert_int_equal(legacy(), l0);
    assert_int_equal(busy_destroys(), d0);
    free(m.b);
    free(out);
}

int main(void)
{
    if (!sl__cuda_stage_built()) {
        printf("SKIP: the GPU stage is not in this build (no nvcc)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_cpu_no_dct),
        cmocka_unit_test(test_roi_region),
        cmocka_unit_test(test_failed_group_keeps_roi),
        cmocka_unit_test(test_refusal_rule),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_the_callers_device_is_kept),
        cmocka_unit_test(test_nvjpeg_handles_on_the_stages_gpu_only),
        cmocka_unit_test(test_nvjpeg_allocations_are_reused),
        cmocka_unit_test(test_concurrent_submitters),
        cmocka_unit_test(test_loader_placement_gpu),
        cmocka_unit_test(test_memory_budget_pays_for_pinned_memory),
        cmocka_unit_test(test_device_batches),
        cmocka_unit_test(test_lowered_depth_frees_no_device_memory),
        cmocka_unit_test(test_device_batch_waits_for_its_consumer),
        cmocka_unit_test(test_device_batch_fenced_on_the_consumers_stream),
        cmocka_unit_test(test_release_on_another_devices_stream),
        cmocka_unit_test(test_release_fences_out_of_the_lock),
        cmocka_unit_test(test_gpu_memory_budget),
        cmocka_unit_test(test_kernels_loaded_as_the_runtime_allows),
        cmocka_unit_test(test_hw_unsupported_image_refused_alone),
        cmocka_unit_test(test_hw_buffers_preallocated),
        cmocka_unit_test(test_kernels_loaded_at_create),
        cmocka_unit_test(test_launch_failure_named),
        cmocka_unit_test(test_nvjpeg_frees_follow_the_stages_work),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
