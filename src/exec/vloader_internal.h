/* exec/vloader_internal: what the volume loader's files share
 * (vloader.c: the public calls, the window, the balancer, the threads;
 * vloader_cache.c: the case cache, the memory budget, the look-ahead).
 * Everything here is guarded by sl_vloader.mu unless said otherwise. */
#ifndef SL_VLOADER_INTERNAL_H
#define SL_VLOADER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "sluice/vloader.h"
#include "sluice/volume.h"

enum { VB_FREE, VB_FILLING, VB_READY, VB_HELD };
enum { CASE_NONE, CASE_LOADING, CASE_READY };
#define LAT_RING 256
/* The most patches a batch: a batch's skipped slots are marked in an array
 * of this size on the stack of the thread that hands it out. */
#define SL__VL_BATCH_MAX 4096

/* An offline stage split into jobs (exec/vloader_offline.h) in flight:
 * its maker and free threads each claim the next job, at most `conc` at
 * once (what the memory budget was charged for); the maker waits for them
 * all, then finishes the stage. */
typedef struct vsplit {
    struct sl__voff *v;
    int64_t g; /* the batch whose task started it */
    int njobs, conc, next, done, rc;
    char err[512]; /* the first failed job's */
} vsplit_t;

typedef struct vcase {
    int64_t raw[3];    /* stored dims, C order */
    double spacing[3]; /* C order */
    int64_t rs[3];     /* resampled, C order */
    int64_t dims[3];   /* after resample and pad, C order */
    double raw_vox, vox;
    double stored; /* bytes of the image and label as stored */
    float *img;    /* cached offline result */
    uint8_t *lbl;
    sl_vol_fg_t *fg; /* the label's foreground components */
    int state, users;
    int64_t bytes;
    vsplit_t *split; /* while LOADING in jobs, with jobs unclaimed */
    /* Its gzip image's and label's access points (volume/gzindex.h),
     * built by the first whole read of a case worth splitting and kept
     * past the case's eviction (that is when its next stage needs them),
     * gz_bytes of them charged to the memory budget. Written by the
     * case's stage (one at a time) and read by its later ones. */
    struct sl__gzindex *gzi[2];
    int64_t gz_bytes;
    int staging; /* its stage runs (its gzi is not given back) */
    /* A look-ahead of it failed: not looked ahead again until it is made
     * (the failure is its task's to report; retrying ahead would keep it
     * LOADING while that task waits for it, for ever). */
    int ahead_failed;
} vcase_t;

typedef struct task {
    int64_t g, c;
    int slot;
    sl_vol_draw_t pre; /* label-free draws */
} task_t;

typedef struct vbuf {
    sl_vbatch_t pub;
    int64_t g;
    int state, pending, rc;
    int64_t t_open;
    char err[512];
    /* SL_ON_ERROR_SKIP: each failed slot's message (NULL: made), nbad of
     * them; the batch is compacted as it is handed out */
    char **serr;
    int nbad;
} vbuf_t;

#define SKIPS_KEPT 10000

struct sl_vloader {
    sl_vloader_options_t o;
    sl_vol_aug_t aug;       /* o.aug with the patch in C order */
    int64_t pdims[3], pvox; /* patch, C order */
    sl_volume_dataset_t *ds;
    int64_t ncases, nb;
    vcase_t *cases;
    /* The cases an epoch holds (all but those left out at create under
     * SL_ON_ERROR_SKIP), in dataset order: nuse of them. */
    int64_t *use, nuse;
    /* Skips counted (skipped_total; stats.skipped until a reset), the
     * first SKIPS_KEPT messages kept; batches passed over empty in a row
     * (every case bad: an error). */
    char **skips;
    int64_t nskips, skipped_total, empty_run;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready, cv_case;
    vbuf_t *bufs;
    int nbufs;
    task_t *tasks;
    int ntasks, cap_tasks;
    int64_t claim_g, next_g;
    /* Two epochs' case orders and their inverses, by epoch parity: the
     * window's, and the cache's and the look-ahead's view of the future. */
    struct eperm {
        int64_t epoch, *perm, *inv;
    } ep[2];
    int stopping;
    pthread_t *th;
    int nth;
    int64_t cache_held;
    /* The memory budget (o.memory_bytes; 0: none): mem_used is the batch
     * buffers, the cache and every offline stage in flight (charged its
     * offline_bytes before it allocates). */
    int64_t mem_limit, mem_used, mem_peak, buf_bytes;
    /* Where a default budget came from (sched/limits.h), appended to the
     * budget's messages; "" when memory_bytes was given or none is set. */
    char mem_why[224];
    int ahead;            /* look-ahead offline stages in flight */
    double split_min_vox; /* sl__vl_split_min_vox, or SL_VLOADER_SPLIT_MIN_VOX
                             from the environment (bench: 1e30, none) */
    float *scratch;       /* bfloat16 output: a float patch per thread */
    int nwid;
    /* ns per voxel: offline (stored voxel: load, resample, normalise,
     * pad, label the components), patch, noise (patch voxel); EMA of
     * measured times. A draw reads the cached components: ~free. */
    double r_off, r_patch, r_noise;
    /* A batch's predicted work over the threads: how far apart batches
     * fall due (the balancer's deadline unit), EMA. */
    double period;
    sl_vloader_stats_t st;
    int64_t lat[LAT_RING];
    int nlat;
};

/* Epoch e's case order and its inverse (two epochs kept, by parity). */
const struct eperm *sl__vl_eperm(sl_vloader_t *l, int64_t e);

/* Gives back cached cases nobody uses, the one used again last first
 * (Belady's rule: the stream's order is known), until the cache fits its
 * bound and `need` more bytes the memory budget (while cases are in use
 * it may not). */
void sl__vl_evict(sl_vloader_t *l, int64_t need);

/* Counts bytes held (the memory budget's count and peak). */
void sl__vl_mem_add(sl_vloader_t *l, int64_t bytes);

/* r += 0.2 (v - r) for v > 0: the cost rates' EMA. */
void sl__vl_ema(double *r, double v);

/* Case c's offline result for a task of batch g, computed once (others wait for
 * it; charged to the memory budget first), with one more user. Unlocks mu while
 * computing. @return 0, or SL_E* with the cause in err; *budget is 1 when the
 * cause is the memory budget (the stage cannot fit beside the batch buffers:
 * a matter of memory_bytes, prefetch and threads, not of the case). */
int sl__vl_case_get(sl_vloader_t *l, int64_t c, int64_t g, int *budget,
                    char *err, size_t errlen);

/* A case of at least this many stored voxels is made in jobs by every
 * thread that is free (balanced only): settable by tests; a loader reads it
 * at create, or SL_VLOADER_SPLIT_MIN_VOX from the environment (what
 * bench/volumes/balance.py --split-off sets to compare). */
extern double sl__vl_split_min_vox;

/* A free thread's help (under mu; unlocks while computing): the next
 * unclaimed job of case c's split stage (c < 0: any case's whose batch is
 * at most g_max), when fewer than its `conc` are running. @return 1 when
 * it made one. */
int sl__vl_help(sl_vloader_t *l, int64_t c, int64_t g_max);

/* An idle thread's work: the next uncached case beyond the window, made
 * ahead when it fits (see vloader_cache.c); a case whose look-ahead failed
 * once is not looked ahead again. Unlocks mu while computing.
 * @return 1 when it ran one, failed or not (mu was let go). */
int sl__vl_look_ahead(sl_vloader_t *l);

#endif
