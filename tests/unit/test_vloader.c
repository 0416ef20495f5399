/* Volume loader (sluice/vloader.h) under threads: the stream (digest of
 * every patch, label and case) is the same with 1 and 4 threads, with and
 * without the balancer, with a cache that keeps nothing, under a memory
 * budget that fits one case at a time, in bfloat16; destroying a
 * loader while its threads are busy neither hangs nor leaks (TSan, ASan);
 * a label whose shape differs from its image is an error naming the case.
 * The equality with the reference pipeline is tests/python/test_vloader.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/vloader_internal.h"
#include "exec/vloader_offline.h"
#include "sluice/version.h"
#include "sluice/vloader.h"
#include "testutil.h"

static char *root;

/* A NIfTI-1 .nii of nx x ny x nz values (dt 2: uint8, 4: int16) with voxel
 * sizes sp and no transform codes. */
static void write_nii(const char *path, int nx, int ny, int nz, int dt,
                      const float sp[3], uint32_t seed)
{
    int es = dt == 2 ? 1 : 2;
    size_t nb = (size_t)nx * ny * nz * (size_t)es;
    uint8_t *b = calloc(1, 352 + nb);
    assert_non_null(b);
    int32_t i32 = 348;
    memcpy(b, &i32, 4);
    int16_t h[8] = {3, (int16_t)nx, (int16_t)ny, (int16_t)nz, 1, 1, 1, 1};
    memcpy(b + 40, h, sizeof h);
    int16_t t[2] = {(int16_t)dt, (int16_t)(8 * es)};
    memcpy(b + 70, t, sizeof t);
    float pix[4] = {1, sp[0], sp[1], sp[2]};
    memcpy(b + 76, pix, sizeof pix);
    float off = 352;
    memcpy(b + 108, &off, 4);
    memcpy(b + 344, "n+1", 4);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < nb / (size_t)es; i++) {
        x = x * 1103515245u + 12345u;
        if (dt == 2) { /* a label: a few boxes of class 1 and 2 */
            size_t z = i / ((size_t)nx * ny), y = i / (size_t)nx % (size_t)ny,
                   xx = i % (size_t)nx;
            b[352 + i] = (uint8_t)((xx > 3 && xx < 9 && y > 2 && y < 7)
                                       ? 1 + (z > (size_t)nz / 2)
                                       : 0);
        } else {
            int16_t v = (int16_t)((x >> 16) % 400) - 100;
            memcpy(b + 352 + 2 * i, &v, 2);
        }
    }
    assert_int_equal(tu_write_file(path, b, 352 + nb), 0);
    free(b);
}

static void make_case(int c, int nx, int ny, int nz, int lbl_nx)
{
    char d[1024], f[1100];
    snprintf(d, sizeof d, "%s/case_%05d", root, c);
    mkdir(d, 0755);
    const float sp[3] = {1.0f + 0.1f * (float)c, 1.3f, 2.0f};
    snprintf(f, sizeof f, "%s/imaging.nii", d);
    write_nii(f, nx, ny, nz, 4, sp, (uint32_t)c);
    snprintf(f, sizeof f, "%s/segmentation.nii", d);
    write_nii(f, lbl_nx, ny, nz, 2, sp, 0);
}

static uint64_t stream_digest_mem(int threads, int no_balance, int64_t cache,
                                  int batches, int64_t memory, int bf16,
                                  sl_vloader_stats_t *st)
{
    sl_vloader_options_t o;
    sl_vloader_options_init(&o);
    o.batch_size = 3;
    o.seed = 5;
    o.threads = threads;
    o.no_balance = no_balance;
    o.cache_bytes = cache;
    o.memory_bytes = memory;
    o.image_bf16 = bf16;
    o.aug.patch[0] = 12;
    o.aug.patch[1] = 10;
    o.aug.patch[2] = 8;
    o.aug.noise_prob = 0.5;
    o.aug.brightness_prob = 0.5;
    sl_vloader_t *l;
    char err[512];
    int rc = sl_vloader_create(root, &o, &l, err, sizeof err);
    if (rc)
        fail_msg("create: %s", err);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < batches; i++) {
        sl_vbatch_t *b;
        rc = sl_vloader_next(l, &b, err, sizeof err);
        if (rc)
            fail_msg("next: %s", err);
        size_t pv = (size_t)(b->dims[0] * b->dims[1] * b->dims[2]);
        const uint8_t *p[3] = {bf16 ? (const uint8_t *)b->image_bf16
                                    : (const uint8_t *)b->image,
                               b->label, (const uint8_t *)b->cases};
        size_t n[3] = {pv * (size_t)b->n * (bf16 ? 2 : 4), pv * (size_t)b->n,
                       (size_t)b->n * 8};
        if (bf16 && b->image)
            fail_msg("bfloat16 batch with a float image");
        for (int k = 0; k < 3; k++)
            for (size_t j = 0; j < n[k]; j++)
                h = (h ^ p[k][j]) * 1099511628211ull;
        sl_vloader_release(l, b);
    }
    if (st) {
        st->size = sizeof *st;
        assert_int_equal(sl_vloader_stats(l, st), 0);
    }
    sl_vloader_destroy(l);
    return h;
}

static uint64_t stream_digest(int threads, int no_balance, int64_t cache,
                              int batches)
{
    return stream_digest_mem(threads, no_balance, cache, batches, 0, 0, NULL);
}

static void test_same_stream_any_threads(void **state)
{
    (void)state;
    uint64_t ref = stream_digest(1, 1, 0, 9); /* 3 epochs of 7 cases */
    assert_int_equal(stream_digest(4, 0, 0, 9), ref);
    assert_int_equal(stream_digest(3, 1, 0, 9), ref);
    assert_int_equal(stream_digest(4, 0, 1, 9), ref); /* nothing cached */
}

/* Under a memory budget that fits the buffers and one case's offline
 * stage (what the loader holds with one thread and nothing cached), four
 * threads take turns: stages wait, the cache gives cases back, the stream
 * is the same and the count never passes the budget. */
static void test_memory_budget(void **state)
{
    (void)state;
    sl_vloader_stats_t one, four;
    uint64_t ref = stream_digest_mem(1, 0, 1, 9, 0, 0, &one);
    /* four threads prefetch 4: two more buffers of 3 patches */
    int64_t budget = one.memory_peak + 2 * 3 * (12 * 10 * 8) * 5;
    assert_true(budget > 0);
    assert_int_equal(stream_digest_mem(4, 0, 0, 9, budget, 0, &four), ref);
    assert_true(four.memory_peak <= budget);
    assert_true(four.offline_runs > 7); /* cases given back, made again */
    /* bfloat16: another stream of bits, the same labels and cases, and
     * deterministic. */
    uint64_t b1 = stream_digest_mem(1, 0, 0, 9, 0, 1, NULL);
    assert_int_equal(stream_digest_mem(4, 0, 0, 9, 0, 1, NULL), b1);
    assert_true(b1 != ref);
}

/* Threads with nothing in the window run later cases' offline stages
 * ahead (the stream's order is known); the stream is unchanged. */
static void test_look_ahead(void **state)
{
    (void)state;
    uint64_t ref = stream_digest(1, 1, 0, 9);
    sl_vloader_options_t o;
    sl_vloader_options_init(&o);
    o.batch_size = 1; /* the window: the next case; then case 2 is ahead */
    o.seed = 5;
    o.threads = 2;
    o.prefetch = 1;
    o.aug.patch[0] = 12;
    o.aug.patch[1] = 10;
    o.aug.patch[2] = 8;
    o.aug.noise_prob = 0.5;
    o.aug.brightness_prob = 0.5;
    sl_vloader_t *l;
    char err[512];
    assert_int_equal(sl_vloader_create(root, &o, &l, err, sizeof err), 0);
    sl_vbatch_t *b;
    assert_int_equal(sl_vloader_next(l, &b, err, sizeof err), 0);
    usleep(300 * 1000); /* the window is full: idle threads look ahead */
    sl_vloader_stats_t st = {.size = sizeof st};
    assert_int_equal(sl_vloader_stats(l, &st), 0);
    assert_true(st.offline_ahead > 0);
    /* A caller built against the first layout (through latency_p99_ns)
     * gets that prefix, nothing past it; a smaller size is refused. */
    union {
        sl_vloader_stats_t s;
        unsigned char b[sizeof(sl_vloader_stats_t)];
    } old;
    size_t v1 = offsetof(sl_vloader_stats_t, latency_p99_ns) + sizeof(int64_t);
    memset(&old, 0xAB, sizeof old);
    old.s.size = v1;
    assert_int_equal(sl_vloader_stats(l, &old.s), 0);
    assert_int_equal(old.s.size, v1);
    assert_true(old.s.batches >= 1);
    for (size_t i = v1; i < sizeof old; i++)
        assert_int_equal(old.b[i], 0xAB);
    old.s.size = v1 - 1;
    assert_int_equal(sl_vloader_stats(l, &old.s), SL_EINVAL);
    sl_vloader_release(l, b);
    sl_vloader_destroy(l);
    assert_int_equal(stream_digest(2, 0, 0, 9), ref);
}

/* One case's offline stage in jobs (the image's and the label's slabs, any
 * count, made in any order) is the single-thread stage byte for byte:
 * image, label and components. */
static void test_slabs_same_bytes(void **state)
{
    (void)state;
    sl_volume_dataset_t *ds;
    char err[512];
    assert_int_equal(sl_volume_dataset_open(root, NULL, &ds, err, sizeof err),
                     0);
    const int64_t patch[3] = {12, 10, 8};
    const double tgt[3] = {1.6, 1.2, 1.2};
    for (int64_t c = 0; c < 7; c++) {
        sl_volume_options_t vo;
        sl_volume_options_init(&vo);
        vo.header_only = 1;
        sl_volume_t *v;
        assert_int_equal(
            sl_volume_dataset_load(ds, c, &vo, &v, NULL, err, sizeof err), 0);
        int64_t raw[3], rs[3], dims[3];
        double sp[3];
        for (int i = 0; i < 3; i++) {
            raw[i] = v->dim[2 - i];
            sp[i] = v->spacing[2 - i];
        }
        sl_volume_free(v);
        assert_int_equal(sl_vol_resample_shape(raw, sp, tgt, rs), 0);
        assert_true(rs[0] != raw[0]); /* axis 0 resampled: slabs blend */
        for (int i = 0; i < 3; i++)
            dims[i] = rs[i] > patch[i] ? rs[i] : patch[i];
        size_t n = (size_t)(dims[0] * dims[1] * dims[2]);
        float *img1;
        uint8_t *lbl1;
        sl_vol_fg_t *fg1;
        assert_int_equal(sl__voff_run(ds, c, raw, rs, dims, patch, 1, &img1,
                                      &lbl1, &fg1, err, sizeof err),
                         0);
        const int counts[3] = {2, 3, (int)rs[0]};
        for (int t = 0; t < 3; t++) {
            sl__voff_t *st;
            int ns = counts[t];
            assert_int_equal(sl__voff_begin(ds, c, raw, rs, dims, patch, ns,
                                            &st, err, sizeof err),
                             0);
            /* plain files: the image's and the label's slabs */
            assert_int_equal(sl__voff_jobs(st), 2 * ns);
            for (int k = 2 * ns - 1; k >= 0; k--) /* last first */
                assert_int_equal(sl__voff_slab(st, k, err, sizeof err), 0);
            float *img;
            uint8_t *lbl;
            sl_vol_fg_t *fg;
            assert_int_equal(sl__voff_end(st, &img, &lbl, &fg, err, sizeof err),
                             0);
            sl__voff_free(st);
            assert_memory_equal(img, img1, n * sizeof *img);
            assert_memory_equal(lbl, lbl1, n);
            assert_memory_equal(fg, fg1, sizeof *fg);
            free(img);
            free(lbl);
            free(fg);
        }
        sl__voff_t *st;
        assert_int_equal(sl__voff_begin(ds, c, raw, rs, dims, patch,
                                        (int)rs[0] + 1, &st, err, sizeof err),
                         SL_EINVAL); /* more slabs than slices */
        free(img1);
        free(lbl1);
        free(fg1);
    }
    sl_volume_dataset_destroy(ds);
}

/* Every case split over the threads (the size floor lowered to 0): the
 * stream is unchanged and the slabs were shared. */
static void test_split_stream(void **state)
{
    (void)state;
    uint64_t ref = stream_digest(1, 1, 0, 9);
    double keep = sl__vl_split_min_vox;
    sl__vl_split_min_vox = 0;
    sl_vloader_stats_t st;
    assert_int_equal(stream_digest_mem(4, 0, 1, 9, 0, 0, &st), ref);
    assert_true(st.offline_split > 0);
    /* under a budget that fits the buffers and one unsplit stage, the
     * split narrows to what fits and the stream is the same */
    sl_vloader_stats_t one;
    stream_digest_mem(1, 0, 1, 9, 0, 0, &one);
    int64_t budget = one.memory_peak + 2 * 3 * (12 * 10 * 8) * 5;
    assert_int_equal(stream_digest_mem(4, 0, 1, 9, budget, 0, &st), ref);
    assert_true(st.memory_peak <= budget);
    sl__vl_split_min_vox = keep;
}

static void test_destroy_while_busy(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        sl_vloader_options_t o;
        sl_vloader_options_init(&o);
        o.threads = 1 + i % 4;
        o.batch_size = 2;
        o.cache_bytes = i % 2 ? 1 : 0;
        o.aug.patch[0] = o.aug.patch[1] = o.aug.patch[2] = 8;
        sl_vloader_t *l;
        char err[512];
        assert_int_equal(sl_vloader_create(root, &o, &l, err, sizeof err), 0);
        if (i % 3) {
            sl_vbatch_t *b;
            assert_int_equal(sl_vloader_next(l, &b, err, sizeof err), 0);
            if (i % 2)
                sl_vloader_release(l, b);
        }
        sl_vloader_destroy(l);
    }
}

static void test_label_shape_named(void **state)
{
    (void)state;
    make_case(7, 16, 12, 10, 15); /* label one voxel short in x */
    sl_vloader_options_t o;
    sl_vloader_options_init(&o);
    o.threads = 2;
    o.aug.patch[0] = o.aug.patch[1] = o.aug.patch[2] = 8;
    o.batch_size = 8;
    sl_vloader_t *l;
    char err[512];
    assert_int_equal(sl_vloader_create(root, &o, &l, err, sizeof err), 0);
    sl_vbatch_t *b;
    int rc = sl_vloader_next(l, &b, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, "case_00007"));
    sl_vloader_destroy(l);
    char d[1100];
    snprintf(d, sizeof d, "%s/case_00007", root);
    tu_rmtree(d);
}

int main(void)
{
    if (!SL_HAVE_NIFTI) {
        printf("SKIP: sluice built without NIfTI support\n");
        return 77;
    }
    tu_watchdog(240, 0, "volume loader");
    root = tu_tmpdir("vloader");
    for (int c = 0; c < 7; c++)
        make_case(c, 16 + 2 * c, 12 + c, 10 + (c % 3), 16 + 2 * c);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_stream_any_threads),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_look_ahead),
        cmocka_unit_test(test_slabs_same_bytes),
        cmocka_unit_test(test_split_stream),
        cmocka_unit_test(test_destroy_while_busy),
        cmocka_unit_test(test_label_shape_named),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(root);
    free(root);
    return rc;
}
