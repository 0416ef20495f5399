/* A CUDA runtime simulated on the CPU, built as libcudart.so.13 in the test
 * tree (tests/CMakeLists.txt), so the real GPU stage (gpu/cuda_stage.c) —
 * its threads, slots, grouping, refusals and budget — runs in tests on a
 * machine without a GPU, under TSan too (test_gpu_cuda_sim). Memory is
 * host memory, every operation runs when it is called (streams and events
 * are then trivially complete), and the two kernels the stage loads run
 * as loops over gpu/resample.h's per-element functions — the same code
 * the CUDA kernels run. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_kernels.h"

/* SIM_CUDA_DEVICES=N: N devices (default 1), sharing the host's memory;
 * device d on PCI bus 0x10 + d (sim_nvml.c finds it by that id). */
static int devices(void)
{
    const char *e = getenv("SIM_CUDA_DEVICES");
    int n = e ? atoi(e) : 1;
    return n > 0 ? n : 1;
}
/* The simulated driver beside this library (libcuda.so.1 in the same
 * folder, where there is one), loaded at the first call as the real
 * runtime loads the driver: the stage finds it already loaded. */
static void load_driver_once(void)
{
    Dl_info di;
    if (!dladdr((void *)load_driver_once, &di) || !di.dli_fname)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s", di.dli_fname);
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path),
             "libcuda.so.1");
    (void)dlopen(path, RTLD_NOW | RTLD_LOCAL); /* kept: never closed */
}
static void load_driver(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_driver_once);
}
int cudaGetDeviceCount(int *n)
{
    load_driver();
    *n = devices();
    return 0;
}
int cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    if (d < 0 || d >= devices())
        return 101; /* cudaErrorInvalidDevice */
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x10 + d); /* CUDA's form */
    return 0;
}
const char *cudaGetErrorString(int e)
{
    return e == 2 ? "out of memory (simulated)" : "simulated CUDA error";
}
int cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return 0;
}
/* The calling thread's device, as the runtime keeps it (0 until set). */
static _Thread_local int current;
/* The calling thread's last error, as the runtime keeps it: set by a
 * failed call, cleared by cudaGetLastError; a caller sharing the runtime
 * (torch) would find it at its next check. */
static _Thread_local int last_error;

static int failed(int e)
{
    last_error = e;
    return e;
}
int cudaGetLastError(void)
{
    int e = last_error;
    last_error = 0;
    return e;
}
/* For tests (dlsym): the thread's last error, left as it is. */
int sim_cuda_last_error(void)
{
    return last_error;
}

int cudaSetDevice(int d)
{
    if (!(d >= 0 && d < devices()))
        return failed(101);
    current = d;
    return 0;
}
int cudaGetDevice(int *d)
{
    *d = current;
    return 0;
}
int cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = *t = (size_t)8 << 30;
    return 0;
}
int cudaMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    return *p ? 0 : 2;
}
/* For tests (dlsym): cudaFree calls. On a GPU each waits for the whole
 * device, the training step's work too: none may come mid-run. */
static atomic_int frees;

int sim_cuda_frees(void)
{
    return atomic_load(&frees);
}
int cudaFree(void *p)
{
    atomic_fetch_add(&frees, 1);
    free(p);
    return 0;
}
int cudaMallocHost(void **p, size_t n)
{
    return cudaMalloc(p, n);
}
int cudaFreeHost(void *p)
{
    free(p);
    return 0;
}
/* A stream belongs to the device current at its making; the special
 * handles (NULL, the legacy default stream; 0x1 and 0x2, cudaStreamLegacy
 * and cudaStreamPerThread) to the caller's current device.
 *
 * Work runs when it is queued, but each stream counts what was queued on
 * it (ops) and how much of that the host has seen finish (done: a
 * synchronize, or the synchronize or successful query of an event
 * recorded after it), so a test can ask whether a stream's work could
 * still be in flight on a GPU (sim_cuda_stream_idle): nvJPEG's simulation
 * asks before it frees a state's buffers. Streams are kept until the
 * library is unloaded (an event may outlive its stream), a destroy
 * marking them dead; one destroyed with work the host had not seen
 * finish is counted (sim_cuda_busy_destroys). */
typedef struct sim_stream {
    int dev, syncs;
    long ops, done;
    int dead;
    struct sim_stream *next; /* all streams made */
} sim_stream_t;

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_stream_t *streams; /* under ev_mu */
static int busy_destroys, legacy_uses;

static int special(const void *s)
{
    return (uintptr_t)s <= 2;
}
static int stream_dev(const void *s)
{
    return special(s) ? current : ((const sim_stream_t *)s)->dev;
}

/* For tests and the simulated nvJPEG (dlsym): one more operation queued
 * on stream s; whether all queued on s has been seen to finish. */
void sim_cuda_stream_op(void *s)
{
    if (special(s))
        return;
    pthread_mutex_lock(&ev_mu);
    ((sim_stream_t *)s)->ops++;
    pthread_mutex_unlock(&ev_mu);
}
int sim_cuda_stream_idle(void *s)
{
    if (special(s))
        return 1;
    pthread_mutex_lock(&ev_mu);
    const sim_stream_t *st = s;
    int idle = st->done == st->ops;
    pthread_mutex_unlock(&ev_mu);
    return idle;
}
/* For tests: streams destroyed with work not seen to finish; uses of the
 * legacy default stream (an event recorded on it, a synchronize of it),
 * which in PyTorch is the trainer's. */
int sim_cuda_busy_destroys(void)
{
    pthread_mutex_lock(&ev_mu);
    int n = busy_destroys;
    pthread_mutex_unlock(&ev_mu);
    return n;
}
int sim_cuda_legacy_uses(void)
{
    pthread_mutex_lock(&ev_mu);
    int n = legacy_uses;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

int cudaMemcpyAsync(void *d, const void *s, size_t n, int k, void *st)
{
    (void)k;
    memcpy(d, s, n);
    sim_cuda_stream_op(st);
    return 0;
}

int cudaStreamCreateWithFlags(void **s, unsigned f)
{
    (void)f;
    sim_stream_t *st = calloc(1, sizeof *st);
    if (!st)
        return 2;
    st->dev = current;
    pthread_mutex_lock(&ev_mu);
    st->next = streams;
    streams = st;
    pthread_mutex_unlock(&ev_mu);
    *s = st;
    return 0;
}
int cudaStreamDestroy(void *s)
{
    pthread_mutex_lock(&ev_mu);
    sim_stream_t *st = s;
    busy_destroys += st->done != st->ops;
    st->dead = 1;
    pthread_mutex_unlock(&ev_mu);
    return 0;
}
__attribute__((destructor)) static void free_streams(void)
{
    while (streams) {
        sim_stream_t *n = streams->next;
        free(streams);
        streams = n;
    }
}
int cudaStreamSynchronize(void *s)
{
    pthread_mutex_lock(&ev_mu);
    if (!special(s)) {
        ((sim_stream_t *)s)->syncs++;
        ((sim_stream_t *)s)->done = ((sim_stream_t *)s)->ops;
    } else if (!s) {
        legacy_uses++;
    }
    pthread_mutex_unlock(&ev_mu);
    return 0;
}
/* For tests (dlsym): how many times stream s was synchronised. */
int sim_cuda_stream_syncs(void *s)
{
    pthread_mutex_lock(&ev_mu);
    int n = special(s) ? 0 : ((sim_stream_t *)s)->syncs;
    pthread_mutex_unlock(&ev_mu);
    return n;
}
/* Events: complete when recorded, except one recorded on the held stream
 * (the legacy default stream, NULL: the trainer's in PyTorch, or the one
 * sim_cuda_hold_on names) while a test holds it: pending then until the
 * hold ends, as a consumer's kernels still reading a batch would be.
 * Waits on a pending event (a stream's, an event synchronize) block the
 * caller until then, the simulator's way of holding back the work queued
 * after them. An event is recorded only on a stream of its own device
 * (cudaErrorInvalidResourceHandle otherwise, as CUDA answers). */
typedef struct sim_event {
    int pending, gen; /* recorded under the hold of generation gen */
    int dev;
    sim_stream_t *on; /* where it was last recorded (NULL: a special
                         stream) and how far that stream's work was */
    long upto;
} sim_event_t;

/* Under ev_mu: the host has seen e pass, and what was before it. */
static void passed(sim_event_t *e)
{
    if (e->on && e->on->done < e->upto)
        e->on->done = e->upto;
}

static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;
static int hold, gen;
static void *hold_stream; /* the stream held */
static int holding;       /* events pending under the hold */

/* For tests (dlsym): on = 1 holds stream s's events from now on; 0
 * completes them. Returns how many were recorded while held. */
int sim_cuda_hold_on(void *s, int on)
{
    pthread_mutex_lock(&ev_mu);
    int n = holding;
    hold = on;
    hold_stream = s;
    if (!on) {
        holding = 0;
        gen++;
        pthread_cond_broadcast(&ev_cv);
    }
    pthread_mutex_unlock(&ev_mu);
    return n;
}
/* The same for the legacy default stream. */
int sim_cuda_hold(int on)
{
    return sim_cuda_hold_on(NULL, on);
}

static int held(const sim_event_t *e)
{
    return e->pending && e->gen == gen;
}

int cudaEventCreateWithFlags(void **e, unsigned f)
{
    (void)f;
    sim_event_t *ev = calloc(1, sizeof(sim_event_t));
    if (ev)
        ev->dev = current;
    *e = ev;
    return ev ? 0 : 2;
}
/* For tests (dlsym): on = 1 makes cudaEventRecord block from now on,
 * as a driver's full queue would, until on = 0; sim_cuda_stalled: how
 * many calls are blocked so. */
static int stall, stalled;

void sim_cuda_stall_records(int on)
{
    pthread_mutex_lock(&ev_mu);
    stall = on;
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_mu);
}
int sim_cuda_stalled(void)
{
    pthread_mutex_lock(&ev_mu);
    int n = stalled;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

int cudaEventRecord(void *e, void *s)
{
    sim_event_t *ev = e;
    if (stream_dev(s) != ev->dev)
        return failed(400); /* cudaErrorInvalidResourceHandle */
    pthread_mutex_lock(&ev_mu);
    for (stalled++; stall;)
        pthread_cond_wait(&ev_cv, &ev_mu);
    stalled--;
    ev->pending = s == hold_stream && hold;
    ev->gen = gen;
    ev->on = special(s) ? NULL : s;
    ev->upto = ev->on ? ev->on->ops : 0;
    legacy_uses += !s;
    holding += ev->pending;
    pthread_mutex_unlock(&ev_mu);
    return 0;
}
int cudaEventQuery(void *e)
{
    pthread_mutex_lock(&ev_mu);
    int r = held(e) ? 600 : 0; /* cudaErrorNotReady */
    if (!r)
        passed(e);
    pthread_mutex_unlock(&ev_mu);
    return r;
}
int cudaEventSynchronize(void *e)
{
    pthread_mutex_lock(&ev_mu);
    while (held(e))
        pthread_cond_wait(&ev_cv, &ev_mu);
    passed(e);
    pthread_mutex_unlock(&ev_mu);
    return 0;
}
int cudaStreamWaitEvent(void *s, void *e, unsigned f)
{
    (void)s, (void)f;
    pthread_mutex_lock(&ev_mu);
    while (held(e))
        pthread_cond_wait(&ev_cv, &ev_mu);
    pthread_mutex_unlock(&ev_mu);
    return 0;
}
int cudaEventDestroy(void *e)
{
    free(e);
    return 0;
}
int cudaLaunchHostFunc(void *s, void (*fn)(void *), void *arg)
{
    (void)s;
    fn(arg);
    return 0;
}

/* The runtime's library API: CUDA 12.8 on; the variant built as a 12.x
 * runtime before it (SIM_CUDART_NO_LIBRARY, libcudart.so.12 in sim12/)
 * lacks it, and the stage loads its kernels through the simulated driver
 * (sim_driver.c) instead. */
/* A library's kernels are loaded lazily, as CUDA_MODULE_LOADING=LAZY (the
 * default from CUDA 12.2) has it: not by cudaLibraryLoadData nor
 * cudaLibraryGetKernel but at a kernel's first launch, which then pays
 * for it. sim_cuda_kernels_loaded (for tests: dlsym) says which of the
 * last loaded library's kernels have been (bit k-1: kernel k). */
static atomic_int loaded;
static atomic_int launched; /* since the last load (sim_launch_fails) */

int sim_cuda_kernels_loaded(void)
{
    return atomic_load(&loaded);
}

#ifndef SIM_CUDART_NO_LIBRARY
static char lib_token;
int cudaLibraryLoadData(void **lib, const void *code, void *a, void **b,
                        unsigned c, void *d, void **e, unsigned f)
{
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
    *lib = code ? &lib_token : NULL;
    atomic_store(&loaded, 0);
    atomic_store(&launched, 0);
    return code ? 0 : 200;
}
int cudaLibraryUnload(void *lib)
{
    (void)lib;
    return 0;
}
int cudaLibraryGetKernel(void **k, void *lib, const char *name)
{
    (void)lib;
    *k = sim_kernel_by_name(name);
    return *k ? 0 : 98; /* cudaErrorInvalidDeviceFunction */
}
#endif
int cudaLaunchKernel(const void *fn, sim_dim3 g, sim_dim3 b, void **args,
                     size_t shmem, void *s)
{
    (void)b, (void)shmem;
    if (sim_launch_fails(atomic_fetch_add(&launched, 1) + 1))
        return 719; /* cudaErrorLaunchFailure */
    if (sim_kernel_run(fn, g.y, args))
        return 98;
    atomic_fetch_or(&loaded, 1 << ((int)(uintptr_t)fn - 1));
    sim_cuda_stream_op(s);
    return 0;
}
