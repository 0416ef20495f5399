/* sim/sim_internal: the simulator's state, shared by the event engine
 * (sim_engine.c: random draws, processor sharing, the stages, the event
 * loop) and the public side (sim.c: create, knobs, snapshots). */
#ifndef SL_SIM_INTERNAL_H
#define SL_SIM_INTERNAL_H

#include <stdint.h>

#include "base/rng.h"
#include "sim/gpu.h"
#include "sim/sim.h"

/* A Philox purpose of the simulator's own (the loader uses 1..3). Each
 * stream holds 2^26 words; a new stream starts every 2^24 words. */
#define SIM_RNG_PURPOSE 0x53u
#define SIM_RNG_WORDS (1u << 24)

/* IT_GCPU: a decoder handing a sample to the GPU stage (gpu_cpu_ms). */
enum {
    IT_FREE = 0,
    IT_LAT,
    IT_IO,
    IT_RCPU,
    IT_QUEUED,
    IT_DCPU,
    IT_GCPU,
    IT_GPU
};
enum { BUF_NONE = 0, BUF_FREE, BUF_FILLING, BUF_READY, BUF_HELD };
enum { CONS_WAIT = 0, CONS_STEP };
enum {
    EV_END = 0,
    EV_CPU,
    EV_IO,
    EV_LAT,
    EV_STEP,
    EV_WORLD,
    EV_GPU,
    EV_REMOTE
};

typedef struct hent {
    double key;
    int id;
} hent_t;

typedef struct heap {
    hent_t *a;
    int n;
} heap_t;

typedef struct item {
    int state;
    int buf;      /* batch buffer of its slot */
    int slot;     /* its slot in that batch (the GPU share routes by it) */
    double t0;    /* start of the current stage (busy time) */
    double t_lat; /* end of the latency phase */
} item_t;

typedef struct bbuf {
    int state;
    int64_t g;
    int pending;
    double t_claim;
} bbuf_t;

/* Sums over one period, turned into rates by the snapshot. */
typedef struct acc {
    double read_busy, decode_busy, wait, lat_sum;
    int64_t read_items, decode_items, lat_count;
    double cpu_self, cpu_other, psi_wait;
} acc_t;

struct sl__sim {
    sl__sim_profile_t p;
    sl__knobs_t k;
    uint64_t seed, stream;
    sl__rng_t rng;
    uint32_t words;
    double spare;
    int has_spare;
    double ln_mu[2], ln_sigma[2]; /* lognormal of read (0), decode (1) */

    double now;
    int next_ev;
    double interfere, bw, step_ms, ccpu;

    item_t *items;
    int nitems;
    int *free_stack, nfree;
    int *dq, dq_head, dq_len; /* decode queue: ring of item ids */
    int *lq, lq_head, lq_len; /* items in latency: ring, FIFO */
    heap_t cpu, io;
    int cpu_cap; /* entries cpu.a holds (remote jobs grow it) */
    double V, B;

    int r_alive, r_busy, d_alive, d_busy;

    bbuf_t *bufs;
    int cap_bufs, nalloc, nfree_bufs;
    int cur, cur_slot;
    int64_t claim_g, next_g;

    int cons;
    int held;
    int nready; /* READY buffers: the consumer looks only when some are */
    double step_rem, t_wait0;
    double t_credit; /* the consumer's wait is in acc.wait up to here */

    sl__sim_gpu_t gpu; /* the GPU stage (sim/gpu.h) */

    int64_t samples, batches, bytes, read_items, decode_items;
    double psi;
    acc_t acc;
    void (*on_batch)(void *, double, double);
    void *on_batch_ctx;
    struct sl__sim_rem *rm; /* remote preparers (sim/remote.c); NULL: off */
};

typedef struct rates {
    double r;        /* share of each of our running threads */
    double cons;     /* consumer step progress per second (<= 1) */
    double self_cpu; /* cores: ours + the consumer's */
    double other;    /* cores: foreign */
    int waiting;     /* 1: some runnable thread waits for a core */
    int runnable;
} rates_t;

/* Starts the next Philox stream of the simulator's purpose. */
void sl__sim_rng_stream(sl__sim_t *s);
/* Service times of stage 0 (read) or 1 (decode): lognormal, mean, CV. */
void sl__sim_set_lognormal(sl__sim_t *s, int stage, double mean_ms, double cv);
/* The CPU shares in force now. */
void sl__sim_cpu_rates(const sl__sim_t *s, rates_t *o);
/* Item id's slot is filled (its decode, or the GPU stage, is done): the
 * item is free again, its batch one sample closer to ready. */
void sl__sim_slot_done(sl__sim_t *s, int id);
/* Min-heaps of (key, id): the CPU and storage heaps, and the remote
 * preparers' (sim/remote.c). h->a must have room for one more. */
void sl__sim_heap_push(heap_t *h, double key, int id);
int sl__sim_heap_pop(heap_t *h);
/* A service time (seconds) of stage 0 (read) or 1 (decode), mean_ms. */
double sl__sim_draw_work(sl__sim_t *s, int stage, double mean_ms);
/* A job of work_s CPU seconds on the machine's cores (a whole thread's
 * demand), growing the heap. @return 0 or SL_ENOMEM. */
int sl__sim_cpu_push(sl__sim_t *s, double work_s, int id);
/* The consumer takes batch next_g now: its wait ends, its step starts. */
void sl__sim_consumer_got(sl__sim_t *s);
/* Runs events until simulated time t_end. */
void sl__sim_run_until(sl__sim_t *s, double t_end);

#endif
