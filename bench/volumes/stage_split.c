/* One case's offline stage (exec/vloader_offline.h), as the volume loader
 * makes it at its defaults (1.6 x 1.2 x 1.2 mm, a 128^3 patch): on one
 * thread; in jobs over T threads without a gzip index (the image and the
 * label apart: what a .nii.gz case's first stage is, building its index);
 * and in T slabs per volume through that index (every later stage). Wall
 * time, and each mode's busiest thread's CPU time: on a loaded machine the
 * wall time counts other processes' turns, the busiest thread's CPU time
 * is about the wall time with T free cores.
 * Usage: stage_split DATASET CASE [THREADS=2] [REPEATS=3] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "exec/vloader_offline.h"
#include "sluice/volops.h"
#include "volume/gzindex.h"

#define MAXT 64

static sl__voff_t *stage;
static atomic_int next_job;
static int njobs;
static double busy[MAXT];

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg, k;
    char err[512];
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    while ((k = atomic_fetch_add(&next_job, 1)) < njobs)
        if (sl__voff_slab(stage, k, err, sizeof err)) {
            fprintf(stderr, "stage_split: %s\n", err);
            exit(1);
        }
    busy[id] = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: stage_split DATASET CASE [THREADS] [REPEATS]\n");
        return 2;
    }
    int64_t c = atoll(argv[2]);
    int nt = argc > 3 ? atoi(argv[3]) : 2, reps = argc > 4 ? atoi(argv[4]) : 3;
    if (nt < 1 || nt > MAXT)
        nt = 2;
    sl_volume_dataset_t *ds;
    char err[512];
    sl_volume_options_t vo;
    sl_volume_options_init(&vo);
    vo.header_only = 1;
    sl_volume_t *v = NULL;
    if (sl_volume_dataset_open(argv[1], NULL, &ds, err, sizeof err) ||
        sl_volume_dataset_load(ds, c, &vo, &v, NULL, err, sizeof err)) {
        fprintf(stderr, "stage_split: %s\n", err);
        return 1;
    }
    int64_t raw[3], rs[3], dims[3], patch[3] = {128, 128, 128};
    double sp[3], tgt[3] = {1.6, 1.2, 1.2};
    for (int i = 0; i < 3; i++) {
        raw[i] = v->dim[2 - i];
        sp[i] = v->spacing[2 - i];
    }
    sl_volume_free(v);
    if (sl_vol_resample_shape(raw, sp, tgt, rs))
        return 1;
    for (int i = 0; i < 3; i++)
        dims[i] = rs[i] > patch[i] ? rs[i] : patch[i];
    printf("case %lld: stored %lld x %lld x %lld (C order), %d threads\n",
           (long long)c, (long long)raw[0], (long long)raw[1],
           (long long)raw[2], nt);
    static const char *names[3] = {"one thread", "jobs, no index (builds it)",
                                   "slabs through the index"};
    sl__gzindex_t *gzi[2] = {NULL, NULL};
    for (int r = 0; r < reps; r++)
        for (int mode = 0; mode < 3; mode++) {
            int t = mode ? nt : 1;
            if (mode == 1) { /* the case's first stage: no index yet */
                sl__gzindex_free(gzi[0]);
                sl__gzindex_free(gzi[1]);
                gzi[0] = gzi[1] = NULL;
            }
            double w0 = clock_s(CLOCK_MONOTONIC);
            if (sl__voff_begin(ds, c, raw, rs, dims, patch, t,
                               mode ? gzi : NULL, &stage, err, sizeof err)) {
                fprintf(stderr, "stage_split: %s\n", err);
                return 1;
            }
            njobs = sl__voff_jobs(stage);
            atomic_store(&next_job, 0);
            pthread_t th[MAXT];
            for (int i = 0; i < t; i++)
                pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
            for (int i = 0; i < t; i++)
                pthread_join(th[i], NULL);
            float *img;
            uint8_t *lbl;
            sl_vol_fg_t *fg;
            if (sl__voff_end(stage, &img, &lbl, &fg, err, sizeof err)) {
                fprintf(stderr, "stage_split: %s\n", err);
                return 1;
            }
            sl__voff_free(stage);
            double wall = clock_s(CLOCK_MONOTONIC) - w0, most = 0;
            for (int i = 0; i < t; i++)
                most = busy[i] > most ? busy[i] : most;
            printf("%-27s %2d jobs: wall %.3f s, busiest thread %.3f s cpu",
                   names[mode], njobs, wall, most);
            if (mode == 2)
                printf(" (index: %d + %d points, %.1f MB)",
                       sl__gzindex_points(gzi[0]), sl__gzindex_points(gzi[1]),
                       (double)(sl__gzindex_bytes(gzi[0]) +
                                sl__gzindex_bytes(gzi[1])) /
                           1e6);
            printf("\n");
            free(img);
            free(lbl);
            free(fg);
        }
    sl__gzindex_free(gzi[0]);
    sl__gzindex_free(gzi[1]);
    sl_volume_dataset_destroy(ds);
    return 0;
}
