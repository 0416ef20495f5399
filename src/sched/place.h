/* sched/place: where samples are decoded — the rule that sets the GPU
 * stage's share of each batch (SL_KNOB_GPU_SHARE, per mille) from
 * telemetry, for every policy that tunes but does not place itself
 * (heuristic, and rl without the share head, run it first in the tick,
 * sched/policy.h; static never; sched/rl.h for an rl policy that places).
 * docs/DESIGN.md "GPU stage".
 *
 * It reads a window as the stall model does (sched/estimate.h): the CPU
 * path's rate at the decoders it has (prep) and at the most it may have
 * (prep_max), the consumer's demand, the GPU stage's capacity — the
 * samples it finished per second it had samples in it (the snapshot's
 * gpu_samples_per_s over gpu_stage_busy) — and the CPU a GPU sample
 * costs over a CPU decode's, k (gpu_cpu_busy: the hand-over, and the
 * stage's threads only while the run queue exceeds the cores): at share
 * s the CPU path makes prep / (1 - s + s k) batch samples/s.
 *   - raise: the consumer waits (stall >= 3 %), or will (the buffer
 *     drains: sl__estimate_draining), the CPU cannot give
 *     more (prep_max within 10 % of prep: the decoders are at their
 *     budget or the cores are taken) and NVML does not report the GPU
 *     full over the window (its JPEG decoders, or its kernels running,
 *     >= 95 % of the time: a trainer that waits while the GPU never
 *     idles queued its work ahead, or shares the GPU with another job,
 *     and more GPU work would slow its step): the share jumps to what
 *     the model asks — the CPU keeps what it makes, the GPU takes the
 *     rest of the demand ((1 - prep / (1.15 demand)) / (1 - k), the
 *     decoders' headroom SL_EST_DECODE_HEADROOM; a consumer that
 *     takes all it gets: the balance G / (prep + G (1 - k)), where both
 *     paths finish a batch together), never past that balance (beyond it
 *     the GPU is the bound) but by the one slot a raise must move, at least one
 * step (50) above the share in force where that is not past it, and at least
 * one more of a batch's slots (the loader routes whole slots; the batch size
 * from the window's totals). A raise of less than half a step is made only
 *     where the model says it buys SL_PLACE_GAIN, and none where it
 *     says the raise buys less than SL_PLACE_MIN_GAIN (a GPU path that
 *     costs about as much CPU as a decode: held says so; the model's
 *     rate at the share in force is at least what the paths made).
 *     Before the GPU's capacity is measured the jump is the demand's
 *     share alone, at most half;
 *   - raise for a starved trainer: it does not wait, the batch buffers
 *     but the one it holds are full (SL_PLACE_FULL), but its time per
 *     sample over the run of calm windows with rq > ncpu threads wanting
 *     the cores is f >= 1 + SL_PLACE_GAIN times its best, and no more
 *     than contention explains (SL_PLACE_STARVED_MAX rq / ncpu: else it
 *     paused): the share rises to take rq (1 - 1 / f) of the decoders'
 *     busy threads off the cores, never past the balance;
 *   - judged by what the trainer got: a raise that did not lift the
 *     delivered rate by 5 % (or cut the stall by 30 %) without the
 *     trainer getting less is undone, and the next raise waits 2, 4 ..
 *     32 windows; one for a draining buffer must make 5 % more, the
 *     trainer getting no less than was made before; one for a starved
 *     trainer must win back a sixth of the speed it lost (undone, its
 *     pace then, at the share before or after, is its best; paid, no
 *     shed goes below it until, SL_PLACE_CALM windows in a row, the
 *     others' threads wanting the cores (the run queue but the
 *     decoders' and the stage's) would leave them uncontended with the
 *     decoders back at the share before it). The trainer takes whole
 *     batches: a verdict beyond a batch's noise either way on the
 *     windows before and after is given at once, else after
 *     SL_PLACE_JUDGE_BATCHES batches (at most SL_PLACE_JUDGE_WINDOWS
 *     windows; for a starved trainer, the most, after SL_PLACE_SETTLE
 *     windows not counted), against as many windows of the run before
 *     the raise. The consumer's own time per sample before and after
 *     (its step: the GPU work it shares the device with) is reported as
 *     the interference the raise cost — a raise that slows the training
 *     step more than it feeds it lowers the rate and is undone;
 *   - shed: no wait for 4 windows and the CPU could carry more of the
 *     batch within 80 % of prep_max: the share falls (at most halved,
 *     by a step at least — a step where half is less, all of a share
 *     under one where the CPU can carry all of the batch — and by one
 *     of a batch's slots at least, to what that CPU capacity allows,
 *     hand-overs counted), giving the GPU
 *     back to the trainer — not while it is starved, nor below a share
 *     paid for it; a shed that brings a wait (stall up by a point, rate
 *     down 3 %, or the buffer draining) is undone, and the next shed
 *     waits 2, 4 .. 32 windows.
 * One change per decision, with its reason; a decision that leaves the
 * share where it is while the trainer waits says why in held. Pure: tests
 * feed windows. */
#ifndef SL_SCHED_PLACE_H
#define SL_SCHED_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "sched/knobs.h"
#include "sluice/telemetry.h"

#define SL_PLACE_STEP 50        /* per mille: the least move */
#define SL_PLACE_STALL 0.03     /* a wait worth placing for */
#define SL_PLACE_GAIN 0.05      /* a raise must buy this much rate */
#define SL_PLACE_MIN_GAIN 0.01  /* a raise the model says buys less: none */
#define SL_PLACE_CALM 4         /* windows without a wait before a shed */
#define SL_PLACE_BACKOFF_MAX 32 /* windows */
#define SL_PLACE_JPG_FULL 0.95  /* NVML's JPEG-decoder use: no room */
#define SL_PLACE_GPU_FULL 0.95  /* NVML's GPU use (kernels running) */
#define SL_PLACE_FULL 0.9 /* of the batch buffers but the trainer's, ready */
#define SL_PLACE_STARVED_MAX 1.1  /* x rq / ncpu: the most contention slows */
#define SL_PLACE_STARVED_BACK 6   /* 1 / the lost speed a raise wins back */
#define SL_PLACE_JUDGE_BATCHES 32 /* a verdict's windows, and its before's */
#define SL_PLACE_JUDGE_WINDOWS 8  /* ... or at most this many windows */
#define SL_PLACE_SETTLE 2 /* windows a starved trainer's trial waits first */

/* Windows added up: seconds, of them the trainer blocked in next(),
 * samples it got, samples both paths made; thread-seconds of the
 * decoders busy (ours) and of the others wanting the cores (the run
 * queue but ours and the GPU stage's own threads). */
typedef struct sl__place_sums {
    double t, waited, samples, made, ours, others;
} sl__place_sums_t;

typedef struct sl__place {
    int trial;        /* +1: a raise under trial, -1: a shed, 0: none */
    int from;         /* the share before it */
    int drain;        /* the raise was made for a draining buffer */
    double starved;   /* ... for a starved trainer: its step over its best
                         (0: not) */
    double best_work; /* the trainer's least time per sample over a calm
                         run of enough batches (0: not seen); after a
                         raise for it that did not pay, its time then */
    int starve_floor; /* the share such a raise paid at: no shed below it
                         until, SL_PLACE_CALM windows in a row, the others'
                         threads wanting the cores, with the decoders as
                         busy as at the share before it (floor_ours: as
                         over its windows, scaled), would not fill them */
    double floor_ours;
    int floor_free; /* windows in a row that would lift it */
    double before_rate, before_stall, before_work, before_made, before_q;
    sl__place_sums_t after; /* the trial's windows so far */
    int after_n;
    sl__place_sums_t run[SL_PLACE_JUDGE_WINDOWS]; /* windows like the last
                                                     since the share moved */
    int nrun, run_kind;
    int raise_hold, raise_backoff; /* windows before the next raise */
    int shed_hold, shed_backoff;
    int calm;            /* windows without a wait */
    double gpu_rate;     /* the stage's samples per busy second (0: not
                            measured yet) */
    double gpu_cpu_k;    /* the CPU a GPU sample costs over a decode's
                            (sched/estimate.h; 0: not measured yet) */
    double interference; /* the last judged raise: the consumer's time per
                            sample after / before - 1 (0: none) */
    char held[96];       /* the last decision's: why the share was not raised
                            although the trainer waited or its buffer drained
                            ("" when neither, a raise was made, or one was
                            under trial) */
    int64_t raises, sheds, undone;
} sl__place_t;

void sl__place_init(sl__place_t *p);

/* 1 when NVML says the GPU has no room over win[0..n) (window means): its
 * JPEG decoders busy >= SL_PLACE_JPG_FULL of the time, or its kernels
 * running >= SL_PLACE_GPU_FULL. *jpg and *kern (either may be NULL) get
 * the means, < 0 where NVML cannot tell. The rule's gate on a raise, and
 * the rl share head's mask (sched/rl.h). */
int sl__place_gpu_full(const sl_snapshot_t *win, int n, double *jpg,
                       double *kern);

/* One decision over win[0..n) (oldest first) with the knobs in force
 * (cur->gpu_share the share): 1 with *share and a reason when the share
 * changes, else 0. Nothing when lim does not let the scheduler place
 * (lim->tune_gpu_share 0). */
int sl__place_step(sl__place_t *p, const sl_snapshot_t *win, int n,
                   const sl__limits_t *lim, const sl__knobs_t *cur, int *share,
                   char *reason, size_t len);

#endif
