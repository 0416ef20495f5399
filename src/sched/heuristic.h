/* sched/heuristic: a model-guided, hill-climbing controller for the
 * pipeline's knobs.
 *
 * It reads a window of telemetry snapshots and proposes at most one knob
 * change per decision. First the model (sched/estimate.h: per-read time,
 * per-sample decode time, the consumer's demand) says where the bound is:
 *   - jump: when the consumer waits and the model asks for clearly more
 *     outstanding reads (or decoders) than run now, the knob goes straight
 *     to what the model asks for, not one step at a time. The next window
 *     judges the jump by the stage's capacity (readers / read time): a
 *     jump that bought less than half of what the model promised met a
 *     cap the model cannot see (a bandwidth limit, CPU taken): the cap is
 *     remembered and that stage's next jump waits `backoff` windows; the
 *     knob stays where the jump put it if that bought at least 10 %
 *     (queued reads cost no CPU), else it is undone;
 *   - under a link's cap the time per read grows with the reads in flight,
 *     so target x read time would ask for ever more of them: the model
 *     asks of the shortest read time seen since the world last changed
 *     (sl__estimate_read_floor), which bounds the depth it wants;
 *   - regime change: when the read time (at the same number of readers:
 *     under a bandwidth cap it grows with them), the demand or the CPU
 *     others take moves by more than half since the knob was last judged,
 *     the holds, backoffs, a known read cap and the read-time floor are
 *     cleared, so the next window may jump again;
 *   - a steady deficit (the model's supply short of the demand, or a
 *     consumer that takes all it gets) is not a burst: no batch buffer is
 *     added for it;
 *   - over-provisioned readers (the model asks for under half of them, no
 *     stall for `calm` windows) are halved, never below what it asks for;
 *   - a draining buffer (the model's supply short of the demand while
 *     fewer than half the batch buffers are ready) is treated as a wait:
 *     the stage gets its jump or step before the consumer waits;
 *   - consumer-bound and calm: the batch buffers deepen at once to hold
 *     2 s of the demand (at most 8, within the memory budget), so the
 *     next change is absorbed while it is seen and answered; not a trial
 *     (the consumer sets the rate), nothing to judge.
 * Then, where the model cannot tell (no reads or decodes measured yet) or
 * asks for nothing new, one step (+1 / -1 thread, +1 / -1 batch buffer):
 *   - the consumer waits (stall) and a stage is busy: give that stage a
 *     thread (decode before read); if no stage is saturated the waits
 *     come in bursts: give a batch buffer. Readers busy while the
 *     process's CPU is low wait on storage: a read thread is I/O depth,
 *     bounded by max_read, not by the CPU-thread budget max_threads;
 *   - mild waits (stall between 1 % and 5 %) with stages that have slack
 *     are bursts too: a batch buffer absorbs them;
 *   - after a step up, the next window judges it: if throughput did not
 *     rise by `gain` and the stall did not fall, the step is undone and
 *     that knob's next increase waits `backoff` windows (doubling: 2..32);
 *   - no stall for `calm` windows while batches sit ready: shed a decode
 *     thread if the others, at their measured rate per busy second, would
 *     still deliver 25 % more than today's rate (saves CPU for the
 *     trainer), never below min_decode (the loader's default, so demand
 *     that rises later meets at least the static default's threads); a
 *     shed that brings the stall back is undone, and the next shed waits
 *     twice as long.
 * Every step stays within the limits (budgets), and every step carries a
 * reason. Like tf.data's autotuner it optimises the observed output rate;
 * unlike it, it also gives resources back. Depends on sched/knobs.h and
 * the public snapshot type. */
#ifndef SL_HEURISTIC_H
#define SL_HEURISTIC_H

#include <stddef.h>
#include <stdint.h>

#include "sched/estimate.h"
#include "sched/knobs.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

/* Windows a read cap is trusted before readers may be tried again. */
#define SL_HEUR_CAP_KEEP 40

typedef struct sl__heur {
    int last_knob; /* the step under trial (SL_KNOB_*), or none */
    int last_dir;  /* +1 / -1 */
    double before_rate, before_stall;
    int hold[4]; /* windows before this knob may rise again */
    int backoff[4];
    int calm;     /* consecutive windows without stall */
    int cooldown; /* windows to wait after any step */
    /* The step under trial: the knob's value before it, the stepped
     * stage's capacity before it and what the model promised (0: a
     * plain step). */
    int from;
    double before_cap, promised_cap;
    /* The world when the knobs were last judged (regime changes). */
    double ref_read_s, ref_demand, ref_other;
    int ref_read; /* read threads when ref_read_s was measured */
    /* Reads/s a jump met as a cap the model cannot see (a link's
     * bandwidth); no read jump while fetch is near it. 0: none known. */
    double read_cap;
    int read_cap_age; /* windows since; forgotten after SL_HEUR_CAP_KEEP */
    int at_cap;       /* this window: fetch within 20 % of read_cap */
    int64_t jumps, reversals; /* model jumps; steps against the last one */
    int last_move[4];         /* +1 / -1: the last direction per knob */
    int read_depth; /* the read knob is the I/O depth (lim->read_depth) */
    /* The shortest time per read since the world last changed: the
     * depth model asks of it under a link's cap (sl__estimate_read_floor).
     * 0: none yet. */
    double read_floor_s;
} sl__heur_t;

void sl__heur_init(sl__heur_t *h);

/* One decision over snaps[0..n) (oldest first). Returns the knob changed
 * (SL_KNOB_*) with *next set and a reason, or SL_KNOB_NONE. */
int sl__heur_step(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                  const sl__limits_t *lim, const sl__knobs_t *cur,
                  sl__knobs_t *next, char *reason, size_t len);

/* The model's part alone (judge a jump under trial, or jump), for a
 * policy that decides the rest itself (rl). SL_KNOB_NONE: the model has
 * nothing to say this window. */
int sl__heur_model_step(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                        const sl__limits_t *lim, const sl__knobs_t *cur,
                        sl__knobs_t *next, char *reason, size_t len);

#endif
