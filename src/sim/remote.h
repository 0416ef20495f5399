/* sim/remote: remote preparers in the simulator (issue 16): the trainer of
 * sluice.ray (python/sluice/ray.py) fed by N preparer processes, on its
 * own node or on others, through an object store and a network link.
 *
 * What is modelled, as sluice.ray does it:
 *   - Preparer j (a Ray actor running the C engine) has `threads` decode
 *     threads and one main thread. It runs one task (a chunk of `chunk`
 *     consecutive batches) at a time, in the order handed: the decoders
 *     take the chunk's items in order (read_ms + decode_ms of CPU each, the
 *     profile's lognormal costs); the main thread serializes each batch
 *     once all its items are done (`serialize_ms` of CPU: the copy and the
 *     put into the object store), so batch i's serialize overlaps batch
 *     i+1's decode within a chunk, not across chunks (an actor runs its
 *     tasks one after the other). The task ends when its last batch is
 *     serialized; then each batch costs `store_ms` of CPU in the object
 *     store's processes on the preparer's node (Ray's raylet and store).
 *   - Placement: preparers 0 .. local-1 run on the trainer's node and
 *     share its `ncpu` cores with the trainer (processor sharing with the
 *     consumer and the interference, as the local pipeline does); the
 *     others fill nodes of `node_cores` cores, `per_node` to a node.
 *   - Delivery: a batch made on the trainer's node is there (zero copy);
 *     one made elsewhere crosses the trainer's link: `link_latency_ms`,
 *     then `batch_bytes` at `link_bw` shared equally by the transfers in
 *     flight (0: unlimited). A chunk is done when all its batches are on
 *     the trainer's node (ray.py: the chunk's future completes).
 *   - The trainer hands out work as ray.py's _hand_out: chunks to the live
 *     preparers with the fewest chunks first, at most `depth` not-done
 *     chunks each, whole chunks only, within a window of batches ahead of
 *     the batch it consumes next: live x depth x chunk (the count),
 *     narrowed by the byte budget `store_bytes` (ray.py's
 *     object_store_bytes) once the first chunk is done (ray.py measures a
 *     batch's bytes then; here they are the profile's batch_bytes) by
 *     sl__sim_remote_window, never below one chunk per live preparer
 *     (capped at SL_SIM_REMOTE_MAX_AHEAD). It hands out at once whenever
 *     a chunk is done or it takes a batch (ray.py does at each batch it
 *     asks for). A chunk is one object in the store: it stays there until
 *     the trainer takes its last batch (one chunk over the window).
 *   - The trainer takes batches in order: once batch g is on its node it
 *     spends `receive_ms` of CPU on it (ray.get + tensors, one thread of
 *     the trainer's node), then steps `step_ms` as the local consumer.
 *   - Events: `remote_preparers` sets the live count mid-run (new ones take
 *     the lowest free slots, hence that slot's node; removed ones, the
 *     highest live, get no new work and finish what they hold, as
 *     set_actors retires them); `link_bw`, `link_latency_ms` (transfers
 *     issued from then on; in flight ones finish at once when the link
 *     becomes unlimited).
 * Not modelled: storage for the preparers (they read at read_ms, a page
 * cache), other nodes' own NICs (only the trainer's link), failures.
 *
 * With remote preparers on (profile remote_preparers > 0, or any
 * remote_preparers event) the local pipeline is off: the knobs (read and
 * decode threads, prefetch) change nothing. The snapshot then shows the
 * preparers as the decode stage (workers = their threads), the link's
 * bytes as net_rx_bytes_per_s, batch_latency_ms from hand-out to arrival.
 * cpu_self is the trainer node's (trainer + preparers there). */
#ifndef SL_SIM_REMOTE_H
#define SL_SIM_REMOTE_H

#include <stdint.h>

/* Profile keys (docs/SIMULATOR.md "Remote preparers"): remote_preparers,
 * remote_threads, remote_local, remote_per_node, remote_node_cores,
 * remote_chunk, remote_depth, serialize_ms, store_ms, receive_ms, link_bw,
 * link_latency_ms, object_store_bytes. */
typedef struct sl__sim_remote {
    int preparers;          /* live preparers at t = 0; 0: the local pipeline */
    int threads;            /* decode threads per preparer */
    int local;              /* preparers 0..local-1 on the trainer's node */
    int per_node;           /* preparers per other node */
    int node_cores;         /* cores of each other node */
    int chunk, depth;       /* batches per task; tasks queued per preparer */
    double serialize_ms;    /* preparer main thread's CPU per batch */
    double store_ms;        /* object store's CPU per batch, preparer's node */
    double receive_ms;      /* trainer's CPU per batch */
    double link_bw;         /* bytes/s into the trainer's node; 0: unlimited */
    double link_latency_ms; /* per transfer, not CPU */
    double store_bytes;     /* byte budget of the batches in flight, whole
                               bytes (object_store_bytes); 0: the count only */
} sl__sim_remote_t;

/* Batches handed out ahead of the trainer at most (memory bound). */
#define SL_SIM_REMOTE_MAX_AHEAD 65536

/* Ids of the remote jobs on the trainer's cores, in the engine's CPU heap,
 * are this plus the job's index (items are below it). */
#define SL_SIM_REMOTE_ID0 (1 << 28)

/* sluice.ray's window rule: the batches that may be in flight ahead of
 * the trainer, given the count window (live x depth x chunk), the byte
 * budget and a batch's bytes (either 0: the count alone), the live
 * preparers and the chunk: min(count, max(budget / batch_bytes, live x
 * chunk)), so each live preparer can always be handed a whole chunk.
 * The reference is python/sluice/ray.py's _window (what the trainer runs);
 * this is the simulator's one copy, for non-negative arguments.
 * tests/python/test_sim_budget.py checks the two agree on a grid (through
 * the extension's private _sim_remote_window). */
int64_t sl__sim_remote_window(int64_t count, int64_t budget,
                              int64_t batch_bytes, int64_t live, int64_t chunk);

/* The measured costs of bench/scale/peers.py on this project's 2-core
 * machine (bench/RESULTS.md, 2026-11-27: s = 16.4, r = 2.8, t = 2.2 ms per
 * 9.6 MB batch through Ray's object store), sluice.ray's chunk 2 / depth 2
 * and one thread per actor, nodes of 16 cores with 16 preparers, a
 * 10 Gb/s link of 0.1 ms, no byte budget; 0 preparers (off). */
void sl__sim_remote_default(sl__sim_remote_t *r);

/* ----------------------------------------------- the engine's hooks */

struct sl__sim;
struct sl__sim_event;
struct sl_snapshot;

/* What the simulation tells about the remote side (tests, benchmarks). */
typedef struct sl__sim_remote_stats {
    int live;            /* preparers taking work */
    int nodes;           /* other nodes in use (ever) */
    int64_t transferred; /* batches across the link */
    double link_busy_s;  /* time with a transfer moving bytes */
    double link_bytes;   /* bytes across the link */
    double node_cpu_s;   /* CPU seconds used on the other nodes */
    int64_t handed;      /* batches handed out */
    int64_t chunks;      /* tasks handed out (handed / chunks: their size) */
    int64_t window;      /* batches ahead allowed at the last hand-out */
    int64_t hand_outs;   /* hand-outs (each chunk done, each take) */
    /* Hand-outs at which the byte budget, not the count window, left a
     * live preparer's free slot empty (ray.py's stats()["budget_held"]). */
    int64_t budget_held;
    /* Batch-seconds (over time: / seconds is the mean count) of the
     * batches in flight, handed out and not taken (being prepared or in
     * the store: what the budget counts), and of those plus the taken
     * ones of the trainer's chunk (its object stays in the store until
     * its last batch is taken): the store's share at most. */
    double in_flight_s, store_s;
} sl__sim_remote_stats_t;

/* 1 when the profile asks for remote preparers (the local pipeline off). */
int sl__sim_remote_wanted(const struct sl__sim *s);
/* The state (s->rm) from the profile. @return 0 or SL_ENOMEM. */
int sl__sim_remote_create(struct sl__sim *s);
void sl__sim_remote_destroy(struct sl__sim *s);
/* In place of the local pipeline's dispatch: hand out work, the trainer
 * takes its next batch when it is there. */
void sl__sim_remote_dispatch(struct sl__sim *s);
/* Time of the next event on the other nodes or the link (INFINITY: none);
 * remembered for _fire. */
double sl__sim_remote_next(struct sl__sim *s);
/* dt seconds pass on the other nodes and the link. */
void sl__sim_remote_advance(struct sl__sim *s, double dt);
/* The event _next found. */
void sl__sim_remote_fire(struct sl__sim *s);
/* A remote job on the trainer's cores is done (id - SL_SIM_REMOTE_ID0). */
void sl__sim_remote_cpu_done(struct sl__sim *s, int job);
/* A remote_preparers / link_bw / link_latency_ms event. */
void sl__sim_remote_world(struct sl__sim *s, const struct sl__sim_event *e);
/* Overrides the period's stage and network fields (see above). */
void sl__sim_remote_snapshot(struct sl__sim *s, double dt,
                             struct sl_snapshot *out);
/* Zeros when remote preparers are off. */
void sl__sim_remote_stats(const struct sl__sim *s, sl__sim_remote_stats_t *st);

#endif
