/* gpu/stage: the GPU stage's interface with the simulated stage
 * (gpu_sim.c: the CPU decode behind it, on its own thread). What a GPU
 * session would otherwise have to find out on the device: the job's
 * geometry (sl__image_geometry) is the CPU path's, so a sample placed on
 * the stage lands in its slot byte for byte as the CPU would write it
 * (train: RandomResizedCrop + flip; DCT scaling included); refused jobs
 * (a box that is not whole pixels, as eval's centre crop gives, or what
 * the stage will not decode) come back for the CPU path and nothing is
 * lost; the share's routing sends exactly its count; done comes exactly
 * once per job under concurrent submitters (TSan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/rng.h"
#include "exec/loader_internal.h" /* sl__loader_xform: the stage's transform */
#include "gpu/placement.h"
#include "gpu_sim.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"
#include "testutil.h"

#define NIMG 24
#define OUT 32

typedef struct {
    sl__bytes_t jpeg[NIMG];
    sl__xform_t x;
} fixture_t;

static void make_images(fixture_t *f, int train)
{
    for (int i = 0; i < NIMG; i++) {
        int w = 60 + 17 * i, h = 50 + 11 * (i % 7); /* DCT scales vary */
        uint8_t *rgb = malloc((size_t)w * h * 3);
        for (size_t k = 0; k < (size_t)w * h * 3; k++)
            rgb[k] = (uint8_t)(k * 13 + (size_t)i * 29 + k / (size_t)(w * 3));
        char err[256];
        memset(&f->jpeg[i], 0, sizeof f->jpeg[i]);
        assert_int_equal(
            sl__jpeg_encode(rgb, w, h, 90, &f->jpeg[i], err, sizeof err), 0);
        free(rgb);
    }
    memset(&f->x, 0, sizeof f->x);
    f->x.mode = train ? SL_XF_RRC : SL_XF_CENTER;
    f->x.scale[0] = 0.08, f->x.scale[1] = 1;
    f->x.ratio[0] = 3.0 / 4, f->x.ratio[1] = 4.0 / 3;
    f->x.resize_size = 37; /* eval: a centre box in fractional pixels */
    f->x.flip = train;
    f->x.out_w = f->x.out_h = OUT;
    f->x.dtype = SL_DTYPE_UINT8;
    f->x.layout = SL_LAYOUT_CHW;
    f->x.mean[0] = f->x.mean[1] = f->x.mean[2] = 0.5f;
    f->x.std[0] = f->x.std[1] = f->x.std[2] = 0.25f;
    f->x.dct_scale = 1;
}

static void free_images(fixture_t *f)
{
    for (int i = 0; i < NIMG; i++)
        sl__bytes_free(&f->jpeg[i]);
}

/* The CPU path's sample i of `epoch`: what a decoder writes. */
static void cpu_sample(const fixture_t *f, sl__scratch_t *s, uint64_t seed,
                       uint64_t epoch, int i, uint8_t *out)
{
    sl__rng_t crop, flip;
    sl__rng_init(&crop, seed, epoch, (uint64_t)i, SL_RNG_CROP);
    sl__rng_init(&flip, seed, epoch, (uint64_t)i, SL_RNG_FLIP);
    char err[256];
    assert_int_equal(sl__image_process(f->jpeg[i].p, f->jpeg[i].n, &f->x, &crop,
                                       &flip, s, out, err, sizeof err),
                     0);
}

/* A job for sample i: its geometry drawn as the CPU path draws it. */
static void make_job(const fixture_t *f, uint64_t seed, uint64_t epoch, int i,
                     uint8_t *out, sl__gpu_job_t *j)
{
    sl__rng_t crop, flip;
    sl__rng_init(&crop, seed, epoch, (uint64_t)i, SL_RNG_CROP);
    sl__rng_init(&flip, seed, epoch, (uint64_t)i, SL_RNG_FLIP);
    char err[256];
    memset(j, 0, sizeof *j);
    j->bytes = f->jpeg[i].p;
    j->n = f->jpeg[i].n;
    j->out = out;
    j->tag = (void *)(intptr_t)i;
    assert_int_equal(sl__image_geometry(j->bytes, j->n, &f->x, &crop, &flip,
                                        j->box, &j->flip, err, sizeof err),
                     0);
}

/* What the loader's completion does: counts, and the CPU path for a
 * refused job. */
typedef struct {
    const fixture_t *f;
    uint64_t seed, epoch;
    atomic_int done, refused, failed;
    atomic_int seen[NIMG];
    sl__scratch_t *cpu[1]; /* the fallback's (done comes from one thread) */
} sink_t;

static void on_done(void *ctx, sl__gpu_job_t *j, int status, const char *why)
{
    sink_t *k = ctx;
    int i = (int)(intptr_t)j->tag;
    atomic_fetch_add(&k->seen[i], 1);
    if (status == SL__GPU_REFUSED) {
        assert_true(why && why[0]);
        atomic_fetch_add(&k->refused, 1);
        cpu_sample(k->f, k->cpu[0], k->seed, k->epoch, i, j->out);
    } else if (status == SL__GPU_FAILED) {
        atomic_fetch_add(&k->failed, 1);
    } else {
        atomic_fetch_add(&k->done, 1);
    }
}

/* In the loader the tag is its item: refuse by the bytes instead. */
static int refuse_by_size(const sl__gpu_job_t *j, void *ctx, const char **why)
{
    (void)ctx;
    *why = "odd-sized (simulated)";
    return j->n % 2 == 1;
}

static int refuse_thirds(const sl__gpu_job_t *j, void *ctx, const char **why)
{
    (void)ctx;
    *why = "progressive JPEG (simulated)";
    return (int)(intptr_t)j->tag % 3 == 0;
}

/* Every sample through the stage (share 1000) vs the CPU path, 3 epochs:
 * the same bytes, with refused ones done by the CPU. */
static void check_same_stream(int train, gpu_sim_refuse_fn refuse,
                              int want_refused)
{
    fixture_t f;
    make_images(&f, train);
    sl__scratch_t *s = sl__scratch_create();
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *cpu = malloc(sb * NIMG), *gpu = malloc(sb * NIMG);
    int flips = 0;
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        sl__gpu_stage_t *st = gpu_sim_create(&f.x, refuse, NULL);
        assert_non_null(st);
        sink_t k = {.f = &f, .seed = 7, .epoch = epoch};
        k.cpu[0] = sl__scratch_create();
        sl__gpu_job_t jobs[NIMG], *jp[NIMG];
        memset(gpu, 0xAB, sb * NIMG);
        for (int i = 0; i < NIMG; i++) {
            cpu_sample(&f, s, 7, epoch, i, cpu + sb * (size_t)i);
            make_job(&f, 7, epoch, i, gpu + sb * (size_t)i, &jobs[i]);
            flips += jobs[i].flip;
            jp[i] = &jobs[i];
        }
        /* two groups, as two batches' GPU shares would be */
        assert_int_equal(st->submit(st, jp, NIMG / 2, on_done, &k), 0);
        assert_int_equal(
            st->submit(st, jp + NIMG / 2, NIMG - NIMG / 2, on_done, &k), 0);
        st->drain(st);
        for (int i = 0; i < NIMG; i++)
            assert_int_equal(atomic_load(&k.seen[i]), 1);
        assert_int_equal(atomic_load(&k.failed), 0);
        assert_int_equal(atomic_load(&k.refused), want_refused);
        assert_int_equal(gpu_sim_done(st), NIMG - want_refused);
        assert_memory_equal(cpu, gpu, sb * NIMG);
        st->destroy(st);
        sl__scratch_destroy(k.cpu[0]);
    }
    if (train) /* the flip is drawn, not constant */
        assert_true(flips > 0 && flips < 3 * NIMG);
    free(cpu);
    free(gpu);
    sl__scratch_destroy(s);
    free_images(&f);
}

static void test_train_geometry_is_the_cpu_paths(void **state)
{
    (void)state;
    check_same_stream(1, NULL, 0);
}

static void test_refused_go_to_the_cpu(void **state)
{
    (void)state;
    check_same_stream(1, refuse_thirds, NIMG / 3);
}

static void test_eval_fractional_box_is_refused(void **state)
{
    (void)state;
    /* Resize+CenterCrop's box is fractional: the simulated stage cannot
     * express it in whole pixels, so it hands every one back (the CUDA
     * kernels take the float box). */
    check_same_stream(0, NULL, NIMG);
}

/* The share routes exactly its count of each batch to the stage. */
static void test_share_routes_its_count(void **state)
{
    (void)state;
    fixture_t f;
    make_images(&f, 1);
    size_t sb = (size_t)OUT * OUT * 3;
    uint8_t *out = malloc(sb * NIMG);
    const int shares[] = {0, 1, 125, 333, 500, 999, 1000};
    for (size_t si = 0; si < sizeof shares / sizeof *shares; si++) {
        sl__gpu_stage_t *st = gpu_sim_create(&f.x, NULL, NULL);
        sink_t k = {.f = &f, .seed = 1, .epoch = 0};
        k.cpu[0] = sl__scratch_create();
        sl__gpu_job_t jobs[NIMG], *jp[NIMG];
        int n = 0;
        for (int i = 0; i < NIMG; i++)
            if (sl__gpu_route(i, NIMG, shares[si])) {
                make_job(&f, 1, 0, i, out + sb * (size_t)i, &jobs[n]);
                jp[n] = &jobs[n];
                n++;
            }
        if (n)
            assert_int_equal(st->submit(st, jp, n, on_done, &k), 0);
        st->drain(st);
        assert_int_equal(n, sl__gpu_route_count(NIMG, shares[si]));
        assert_int_equal(gpu_sim_done(st), n);
        st->destroy(st);
        sl__scratch_destroy(k.cpu[0]);
    }
    free(out);
    free_images(&f);
}

/* Concurrent submitters (the decoders): each job's done exactly once. */
typedef struct {
    sl__gpu_stage_t *st;
    sl__gpu_job_t *jobs;
    sink_t *k;
} submitter_t;

static void *submit_main(void *arg)
{
    submitter_t *s = arg;
    for (int g = 0; g < NIMG; g += 4) {
        sl__gpu_job_t *jp[4];
        for (int i = 0; i < 4; i++)
            jp[i] = &s->jobs[g + i];
        /* a group of two, then two alone */
        if (s->st->submit(s->st, jp, 2, on_done, s->k) ||
            s->st->submit(s->st, jp + 2, 1, on_done, s->k) ||
            s->st->submit(s->st, jp + 3, 1, on_done, s->k))
            abort();
        s->st->drain(s->st); /* jp leaves scope: wait for its jobs */
    }
    return NULL;
}

static void test_concurrent_submitters(void **state)
{
    (void)state;
    fixture_t f;
    make_images(&f, 1);
    size_t sb = (size_t)OUT * OUT * 3;
    enum { T = 4 };
    uint8_t *out = malloc(sb * NIMG * T);
    sl__gpu_job_t jobs[T][NIMG];
    sink_t k = {.f = &f, .seed = 3, .epoch = 1};
    k.cpu[0] = sl__scratch_create();
    for (int t = 0; t < T; t++)
        for (int i = 0; i < NIMG; i++)
            make_job(&f, 3, 1, i, out + sb * ((size_t)t * NIMG + i),
                     &jobs[t][i]);
    sl__gpu_stage_t *st = gpu_sim_create(&f.x, refuse_thirds, NULL);
    pthread_t th[T];
    submitter_t sub[T];
    for (int t = 0; t < T; t++) {
        sub[t] = (submitter_t){st, jobs[t], &k};
        assert_int_equal(pthread_create(&th[t], NULL, submit_main, &sub[t]), 0);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    st->drain(st);
    for (int i = 0; i < NIMG; i++)
        assert_int_equal(atomic_load(&k.seen[i]), T);
    assert_int_equal(atomic_load(&k.refused), T * NIMG / 3);
    assert_int_equal(atomic_load(&k.done), T * (NIMG - NIMG / 3));
    st->destroy(st);
    /* every copy is the CPU path's */
    sl__scratch_t *s = sl__scratch_create();
    uint8_t *want = malloc(sb);
    for (int i = 0; i < NIMG; i++) {
        cpu_sample(&f, s, 3, 1, i, want);
        for (int t = 0; t < T; t++)
            assert_memory_equal(want, out + sb * ((size_t)t * NIMG + i), sb);
    }
    free(want);
    sl__scratch_destroy(s);
    sl__scratch_destroy(k.cpu[0]);
    free(out);
    free_images(&f);
}

/* The loader with the simulated stage under it: the stream (pixels,
 * labels, indices, order) is placement cpu's whatever the share, the
 * share's count of each batch went to the stage, refused samples were
 * done by the CPU and counted. codec > 0: with a sample cache of encoded
 * samples stored so (sl_cache_codec_t), whose hits take the same path. */
static uint64_t run_digest(const char *root, int share, int codec,
                           sl__gpu_stage_t **stp, int64_t *gpu,
                           int64_t *refused)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 8;
    o.image_size = OUT;
    o.seed = 11;
    o.epochs = 2;
    o.decode_threads = 3;
    o.telemetry_ms = 1;
    o.placement = stp ? SL_PLACEMENT_AUTO : SL_PLACEMENT_CPU;
    if (codec > 0) {
        o.cache_bytes = 64 << 20;
        o.cache_codec = codec;
    }
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    if (stp) {
        sl_options_t used;
        sl_options_init(&used);
        sl_loader_options(l, &used);
        sl__xform_t x;
        sl__loader_xform(&used, &x);
        *stp = gpu_sim_create(&x, refuse_by_size, NULL);
        assert_int_equal(sl__testing_gpu_stage_set(l, *stp), 0);
        assert_int_equal(sl_loader_set(l, SL_PARAM_GPU_SHARE, share), 0);
    }
    assert_int_equal(sl_loader_start(l, NULL), 0);
    uint64_t h = 1469598103934665603ULL;
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        const uint8_t *parts[3] = {b->data, (const uint8_t *)b->labels,
                                   (const uint8_t *)b->indices};
        size_t lens[3] = {b->sample_bytes * (size_t)b->n,
                          sizeof(int64_t) * (size_t)b->n,
                          sizeof(int64_t) * (size_t)b->n};
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < lens[p]; i++)
                h = (h ^ parts[p][i]) * 1099511628211ULL;
        sl_loader_release(l, b);
    }
    assert_int_equal(rc, SL_EEND);
    if (stp) {
        sl_snapshot_t s;
        sl_snapshot_init(&s);
        /* the counters are read by the collector: wait for a period
         * after the last sample */
        int64_t want = (int64_t)sl__gpu_route_count(8, share) * 12;
        for (int i = 0; i < 400; i++) {
            assert_int_equal(sl_loader_snapshot(l, &s), 0);
            if (s.placement_present &&
                s.gpu_samples_total + s.gpu_refused_total >= want)
                break;
            usleep(5000);
        }
        *gpu = s.gpu_samples_total;
        *refused = s.gpu_refused_total;
        assert_int_equal(s.placement_gpu, 1);
        assert_int_equal(s.gpu_share, share);
        if (codec > 0) /* the second epoch's samples were hits */
            assert_true(s.cache_hits_total >= 24);
        if (*refused)
            assert_string_equal(s.gpu_refused_why, "odd-sized (simulated)");
    }
    sl_loader_destroy(l);
    if (stp)
        (*stp)->destroy(*stp);
    return h;
}

static void test_loader_stream_is_placement_cpus(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_stage", 3, 16, 80, 60); /* 48 samples */
    uint64_t want = run_digest(root, 0, 0, NULL, NULL, NULL);
    /* shares, then a cache whose second epoch hits: plain entries
     * (viewed in place) and compressed ones (copied out) */
    const int shares[] = {0, 500, 1000, 500, 500};
    const int codecs[] = {0, 0, 0, SL_CACHE_CODEC_NONE, SL_CACHE_CODEC_ZSTD3};
    for (int i = 0; i < 5; i++) {
        sl__gpu_stage_t *st;
        int64_t gpu = -1, refused = -1;
        uint64_t got =
            run_digest(root, shares[i], codecs[i], &st, &gpu, &refused);
        assert_true(got == want);
        /* 6 batches of 8 per epoch, 2 epochs: the share's count of each */
        int64_t routed = (int64_t)sl__gpu_route_count(8, shares[i]) * 12;
        assert_int_equal(gpu + refused, routed);
        if (routed) {
            assert_true(gpu > 0);
            assert_true(refused > 0);
        }
    }
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_geometry_is_the_cpu_paths),
        cmocka_unit_test(test_refused_go_to_the_cpu),
        cmocka_unit_test(test_eval_fractional_box_is_refused),
        cmocka_unit_test(test_share_routes_its_count),
        cmocka_unit_test(test_concurrent_submitters),
        cmocka_unit_test(test_loader_stream_is_placement_cpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
