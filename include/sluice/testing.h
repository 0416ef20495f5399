/*
 * sluice/testing.h: hooks for tests and benchmarks, NOT part of the
 * release ABI: nothing here is exported from libsluice.so (the functions
 * have hidden visibility) and the header is not installed. The CLI, the
 * Python extension, the unit tests and the benchmarks link the static
 * library and reach them there.
 */
#ifndef SLUICE_TESTING_H
#define SLUICE_TESTING_H

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Emulated slow or remote storage (exec/throttle.c), live while batches
 *  flow; waits, not CPU, and digests are unchanged.
 *  SL_TESTING_READ_LATENCY_US: each read completes no sooner than this
 *  after it was issued (a request's round trip; R read threads keep R
 *  reads outstanding and hide it), 0..60 s [0: off].
 *  SL_TESTING_READ_BYTES_PER_S: a token bucket shared by all readers caps
 *  the bytes read at burst + rate x time, burst = 50 ms of traffic, at
 *  least 64 KiB (a link's or a disk's bandwidth) [0: no cap]. */
typedef enum sl_testing_storage {
    SL_TESTING_READ_LATENCY_US = 1,
    SL_TESTING_READ_BYTES_PER_S = 2
} sl_testing_storage_t;

/** Sets one emulated-storage value (0: that part off). SL_ERANGE when out
 *  of range. Any thread. */
int sl__testing_storage_set(sl_loader_t *l, sl_testing_storage_t what,
                            int64_t value);
/** Reads one emulated-storage value in force. Any thread. */
int sl__testing_storage_get(const sl_loader_t *l, sl_testing_storage_t what,
                            int64_t *value);

/** The read path this loader runs: 1 and "io_uring" (reads in flight,
 *  sl_options_t.io_depth), or 0 and why not ("off (io_depth -1)", "built
 *  without liburing", "io_uring_queue_init: Operation not permitted").
 *  The string is static. */
int sl__testing_read_path(const sl_loader_t *l, const char **what);

/** The memory budget this loader keeps (max_memory_bytes, 0: none), with
 *  why: "" when given, else where the default came from (" (the default:
 *  1/2 of the cgroup's memory limit of N MB; ...)"). The string lives as
 *  long as the loader. */
int64_t sl__testing_memory_budget(const sl_loader_t *l, const char **why);
/** The same for a text loader (sluice/text.h): its max_memory_bytes and
 *  where a default came from. */
struct sl_text_loader;
int64_t sl__testing_text_memory_budget(const struct sl_text_loader *l,
                                       const char **why);
/** The same for a volume loader (sluice/vloader.h): its memory_bytes
 *  and where a default came from. */
struct sl_vloader;
int64_t sl__testing_vloader_memory_budget(const struct sl_vloader *l,
                                          const char **why);

/** Where this loader decodes: 1 when the GPU stage takes its share, 0 for
 *  the CPU only, with why (placement cpu: ""; auto: the reason, as
 *  telemetry's placement.why). The string lives as long as the loader. */
int sl__testing_placement(const sl_loader_t *l, const char **why);

/** Puts a GPU stage (src/gpu/stage.h; the tests' simulated one) under a
 *  loader that is not running: its placement becomes the GPU stage's,
 *  SL_PARAM_GPU_SHARE may go to 1000, and each batch's share of samples
 *  is handed to it. The stage must outlive the loader's runs (destroy
 *  the loader, or stop it, before the stage). SL_ESTATE while running. */
struct sl__gpu_stage;
int sl__testing_gpu_stage_set(sl_loader_t *l, struct sl__gpu_stage *st);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_TESTING_H */
