/* sched/limits: the budget rule, written once. The loader (at create and
 * in sl_loader_set), the simulator and policy training all call it.
 *
 * From the options as the user gave them, the cores and the bytes of one
 * batch buffer:
 *   - the scheduler tunes a knob the user left at 0 / SL_AUTOTUNE, unless
 *     the policy is static;
 *   - a knob left to the scheduler starts at its default: one reader, a
 *     decoder per core, two batch buffers per decoder (at least 2);
 *   - CPU threads: max_threads = the user's, else 2 x cores (at least 2,
 *     and at least what the user set for decode + 1); max_decode =
 *     max_threads - 1 (at most SL_KNOB_MAX_THREADS). A tuned decode start
 *     above the budget is lowered to it; a fixed one is an error;
 *   - I/O depth: max_read = 4 x cores, at least SL_IO_DEPTH_MIN (64) and at
 *     most 256, or what the user set if more. An outstanding read is not
 *     a core: it waits on storage (at 25 ms a read, 440 samples/s need 11
 *     in flight whatever the core count); what it costs is one read-ahead
 *     item of memory (the loader keeps max_read + 32 of them);
 *   - memory: max_prefetch = 4 x the start (at least 16); with a memory
 *     budget B, the working memory W = max(B / 4, SL_LIMITS_MEM_RESERVE)
 *     is kept for read-ahead (mem_read = W / 4: encoded samples read and
 *     not yet decoded) and decode scratch (mem_decode = W - mem_read);
 *     batch buffers get the rest: prefetch at most (B - W) / batch bytes,
 *     the start lowered to fit; a budget that holds no batch is an error;
 *     without a budget, mem_read and mem_decode are SL_LIMITS_READ_MAX and
 *     SL_LIMITS_DECODE_MAX (the image loader gives one from the cgroup's
 *     memory limit first: sl__limits_default_memory);
 *   - GPU memory (sl__limits_device, after create): device batches get
 *     what the GPU stage leaves of gpu_memory_bytes, prefetch at most that
 *     over a batch's bytes, for everyone;
 *   - calm sheds stop at the start's decode threads when decode is tuned.
 * Depends on knobs, base (errors) and the public options type. */
#ifndef SL_LIMITS_H
#define SL_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "sched/knobs.h"
#include "sluice/sluice.h"

/* The least of a memory budget kept for read-ahead and decode scratch. */
#define SL_LIMITS_MEM_RESERVE (32 << 20)
/* Without a budget, read-ahead and decode scratch are still bounded: far
 * above any real image (the decoders take at most 2^28 pixels), far below
 * what hostile sizes (a record may declare 4 GiB, on each of 32 items)
 * would take. */
#define SL_LIMITS_READ_MAX ((int64_t)2 << 30)
#define SL_LIMITS_DECODE_MAX ((int64_t)4 << 30)

/* The default memory budget, where the user gave none: in a cgroup with a
 * memory limit L (a container's, a Kubernetes pod's), L / 2. Past L the
 * OOM killer ends the process, with no message, whatever the host has
 * free; a budget keeps a large image (a 16000^2 PNG's 760 MB) a failed
 * sample instead. Half, not all: the process's own memory (libraries,
 * the decoders' fixed scratch, the cache) and a trainer in the same
 * container live under L too. A cache the user asked for (cache_bytes,
 * which comes off the top of a budget) is memory chosen on purpose: the
 * default holds it besides the half, at most L (a cache above half the
 * limit failed create under a budget no one asked for). 0 (no budget)
 * where there is no limit. */
#define SL_LIMITS_CGROUP_SHARE 2
/* The default budget from cgroup_limit (bytes; 0: no limit, no budget)
 * holding cache_bytes (a cache asked for, 0 for none) besides the half,
 * with where it came from in why when there is one (" (the default: 1/2
 * of the cgroup's memory limit of N MB...; OPTION sets another)",
 * appended to the budget's messages; "" when none; why may be NULL).
 * option names what sets a budget ("max_memory_bytes (--max-memory)").
 * Every loader takes it (exec/loader_opts.c, exec/text_loader.c,
 * exec/vloader.c) when its budget is 0; the caller reads the limit
 * (telemetry/machine.h). */
int64_t sl__limits_default_memory(uint64_t cgroup_limit, int64_t cache_bytes,
                                  const char *option, char *why, size_t cap);

/* Reads in flight the open-files limit (RLIMIT_NOFILE, ulimit -n) allows:
 * each holds a file open (a read thread's, an io_uring read's), so at
 * most the limit less the files open already less SL_LIMITS_FD_SPARE for
 * what a run opens besides (io_uring, eventfds, telemetry and state
 * files, the disk cache, sockets); at least 1. nofile <= 0: no limit.
 * Past it every open fails with EMFILE, not the file's fault: a run that
 * asked for more reads than that failed at its first batch. */
#define SL_LIMITS_FD_SPARE 16
int sl__limits_fd_reads(int64_t nofile, int open_now);
/* Of `room` files for reads (sl__limits_fd_reads), what the read threads
 * may use. A thread holds its read's descriptor where a read has one of
 * its own (opens: an ImageFolder's file, a connection at a URL; local
 * shards and record files are read through descriptors held since open,
 * already among the files open) and, with
 * reads in flight (async: io_uring), its ring's descriptor: room over
 * what one thread holds, at least 1; INT_MAX (no cap) where it holds
 * none, or there is no limit (room INT_MAX). */
int sl__limits_fd_threads(int room, int async, int opens);
/* What an I/O depth of its own may use of `room`: the room less the
 * `threads` read threads' rings where a read holds a descriptor of its
 * own, at least 1; INT_MAX where reads hold none, or there is no limit. */
int sl__limits_fd_depth(int room, int threads, int opens);

/* The default I/O-depth budget (outstanding reads) on ncpu cores: 4 x
 * cores, at least SL_IO_DEPTH_MIN, at most 256 (the engine's worker
 * limit). */
#define SL_IO_DEPTH_MIN 64
/* Asynchronous reads (exec/loader_aread.c): reads in flight are bounded by
 * the read memory budget, one SL_IO_DEPTH_BYTES per read (ImageNet's JPEGs
 * average 110 KB), at most SL_IO_DEPTH_MAX and at least max_read. */
#define SL_IO_DEPTH_MAX 1024
#define SL_IO_DEPTH_BYTES (256 << 10)
/* The depth reads at URLs start at. Each waits a round trip (10 ms on the
 * issue-15 link, more on object stores): at depth 1 the heuristic's first
 * window (~0.2 s, before it has measured the latency) would read 1/RTT
 * samples a second, a fifth of the first epoch on a 1,000-sample set; 16
 * in flight carry 1,600 samples/s at 10 ms, and the heuristic sets the
 * depth from measured latency at its first decision. */
#define SL_IO_DEPTH_REMOTE_START 16

/* Read-ahead items a loader keeps (the simulator too): one per
 * outstanding read, plus SL_ITEMS_QUEUED read and waiting for a decoder. */
#define SL_ITEMS_QUEUED 32
int sl__read_ahead_items(int max_read);
int sl__io_depth_budget(int ncpu);

/* A knob's default value on ncpu cores (prefetch: from decode_threads). */
int sl__limits_knob_default(int knob, int ncpu, int decode_threads);

/* The budgets for options `o` (knobs as the user gave them: <= 0 means
 * left to the scheduler; policy, max_threads, max_memory_bytes read) on
 * ncpu cores with batch buffers of batch_bytes. Fills *lim and *start
 * (the knobs to start from).
 * @return 0, or SL_ERANGE with the cause in err. */
int sl__limits_make(const sl_options_t *o, int ncpu, size_t batch_bytes,
                    sl__limits_t *lim, sl__knobs_t *start, char *err,
                    size_t errlen);
/* As sl__limits_make, `what` naming the working share in the message of
 * a budget that holds no batch: "reading and decoding" (sl__limits_make,
 * the image loader), "tokenizing" (the text loader). */
int sl__limits_make_named(const sl_options_t *o, int ncpu, size_t batch_bytes,
                          const char *what, sl__limits_t *lim,
                          sl__knobs_t *start, char *err, size_t errlen);

/* Limits for a policy exercised alone (a test, a benchmark, a fuzz
 * target): every knob tuned, max_threads threads (decode: one fewer),
 * max_read reads, max_prefetch buffers, no memory budget. */
sl__limits_t sl__limits_plain(int max_threads, int max_read, int max_prefetch);

/* After sl__limits_make: `bytes` the loader holds beside its batches (the
 * GPU stage's pinned memory) come off the batch buffers' share of a
 * memory budget: lim->max_prefetch and start->prefetch lowered to what is
 * left. Nothing without a budget. @return 0, or SL_ERANGE when no batch
 * of batch_bytes is left beside them. */
int sl__limits_charge(sl__limits_t *lim, int64_t bytes, size_t batch_bytes,
                      sl__knobs_t *start);

/* After sl__limits_make, with batches in GPU memory under a GPU memory
 * budget (sl_options_t.gpu_memory_bytes): `room` bytes of it left beside
 * the GPU stage hold the device batch buffers: lim->max_prefetch and
 * start->prefetch lowered to what fits, for everyone (hard_prefetch).
 * @return 0, or SL_ERANGE when no batch of batch_bytes fits. */
int sl__limits_device(sl__limits_t *lim, int64_t room, size_t batch_bytes,
                      sl__knobs_t *start);

/* Asynchronous reads, after sl__limits_make: the I/O depth's budget
 * (lim->max_depth: mem_read / SL_IO_DEPTH_BYTES, at most SL_IO_DEPTH_MAX,
 * at least max_read, or the user's io_depth if more) and its start.
 * async: the loader can keep reads in flight (io_uring works and
 * o->io_depth >= 0). Then:
 *   - io_depth given: it is fixed, and so are the read threads (more of
 *     them would not add reads in flight);
 *   - io_depth and read_threads left to the heuristic: its read knob is
 *     the depth (lim->read_depth = 1, lim->max_read = max_depth),
 *     starting at the read threads' start — or, remote (the reads go to
 *     URLs), at SL_IO_DEPTH_REMOTE_START; the threads stay there;
 *   - otherwise (rl, whose policy was trained on read threads; static;
 *     read_threads given) the depth follows the read threads: one read in
 *     flight each, as without asynchronous reads.
 * @return the depth to start with, 0 for "follows the read threads". */
int sl__limits_io_depth(const sl_options_t *o, int async, int remote,
                        const sl__knobs_t *start, sl__limits_t *lim);

/* The values anyone may set `knob` to under lim, [*min, *max]: the
 * engine's ranges narrowed by the hard budgets (sl_loader_param_range).
 * @return 0, or SL_EINVAL for an unknown knob. */
int sl__limits_range(const sl__limits_t *lim, int knob, int64_t *min,
                     int64_t *max);

/* May anyone set `knob` to `value` under lim? The engine's ranges (1..
 * SL_KNOB_MAX_THREADS threads, 1..SL_KNOB_MAX_PREFETCH buffers) and the
 * hard budgets. @return 0, SL_ERANGE, or SL_EINVAL for an unknown knob. */
int sl__limits_check(const sl__limits_t *lim, int knob, int64_t value);

#endif
