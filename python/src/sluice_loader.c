/*
 * sluice.Loader: iterates an sl_loader_t, yielding (images, labels) numpy
 * arrays that are views of the engine's pooled batch buffers (no copy).
 *
 * Ownership, three objects (Core and Batch: sluice_core.c):
 *   Core   owns the sl_loader_t; destroyed (sl_loader_destroy) when its
 *          last reference goes.
 *   Batch  owns one handed-out sl_batch_t; both arrays of a batch hold it
 *          as their numpy base, and it holds the Core. When the last array
 *          goes, it gives the buffer back (sl_loader_release).
 *   Loader holds the Core; close() drops it, so the engine lives on while
 *          any batch is alive and dies with the last one.
 *
 * Epochs in ordered mode: the engine is started for an unbounded run
 * (SLPY_EPOCHS_AHEAD) and the Loader ends each iteration itself after
 * `epochs` epochs. The next iteration then continues the same pipeline
 * (batches of the next epoch are already prefetched). Only a jump
 * elsewhere restarts the engine (sl_loader_start); batches still held then
 * stay valid, the same engine's.
 *
 * Plans (start_plan): the engine is restarted on the given batches; the
 * next iteration yields them in the plan's order and ends with the plan.
 * A plan is a side trip: `position` (where a plain iteration continues) is
 * left where it was, and the next plain iteration restarts the engine.
 *
 * Everything here runs under the GIL; the GIL is released around every
 * engine call that waits or works (create, start, next, destroy).
 */
#include "sluice_loader.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------- Core and Batch */

static void engine_destroy(void *l)
{
    sl_loader_destroy(l);
}

static void engine_release(void *l, const void *b)
{
    sl_loader_release(l, b); /* a short lock, no wait */
}

static void engine_release_on(void *l, const void *b, void *stream)
{
    sl_loader_release_on(l, b, stream); /* records an event, no wait */
}

static const char *engine_skipped(const void *l, int64_t i)
{
    return sl_loader_skipped_message(l, i);
}

static slpy_kind_t loader_kind = {
    .core_name = "sluice._sluice._Core",
    .core_doc = "The engine behind a Loader (internal).",
    .batch_name = "sluice._sluice._BatchBuffer",
    .batch_doc = "Keeps one engine batch buffer out of the pool while arrays "
                 "view it (internal).",
    .destroy = engine_destroy,
    .release = engine_release,
    .release_on = engine_release_on,
    .skipped = engine_skipped,
};

/* (images, labels) over b, which `core` handed out (its held count already
 * includes b). On failure the batch is released. */
static PyObject *make_batch(CoreObject *core, const sl_batch_t *b)
{
    slpy_batch_t *o = slpy_batch_new(core, b);
    if (!o)
        return NULL;
    npy_intp d[4] = {b->n, b->channels, b->height, b->width};
    if (b->layout == SL_LAYOUT_HWC)
        d[1] = b->height, d[2] = b->width, d[3] = b->channels;
    int u8 = b->dtype == SL_DTYPE_UINT8;
    PyObject *img =
        b->device >= 0
            ? slpy_batch_cuda(o, u8 ? "|u1" : "<f4", 4, d, b->data, b->device)
            : slpy_batch_view(o, u8 ? NPY_UINT8 : NPY_FLOAT32, 4, d, b->data);
    npy_intp n = b->n;
    PyObject *lab =
        img ? slpy_batch_view(o, NPY_INT64, 1, &n, b->labels) : NULL;
    PyObject *t = lab ? PyTuple_Pack(2, img, lab) : NULL;
    Py_XDECREF(img);
    Py_XDECREF(lab);
    Py_DECREF(o);
    return t;
}

/* ---------------------------------------------------------------- Loader */

static int loader_closed(LoaderObject *self)
{
    return slpy_closed(self->core, "sluice.Loader");
}

static void drop_pending(LoaderObject *self)
{
    if (self->pending) {
        slpy_core_release(self->core, self->pending);
        self->pending = NULL;
    }
}

/* A new Core from the options; knobs as they are now. */
CoreObject *slpy_loader_core_create(LoaderObject *self)
{
    sl_options_t o = self->opt;
    o.telemetry_path =
        self->telemetry_path ? PyBytes_AS_STRING(self->telemetry_path) : NULL;
    o.policy_file =
        self->policy_file ? PyBytes_AS_STRING(self->policy_file) : NULL;
    o.cache_dir = self->cache_dir ? PyBytes_AS_STRING(self->cache_dir) : NULL;
    o.epochs = o.unordered ? self->epochs : SLPY_EPOCHS_AHEAD;
    const char *src = PyBytes_AS_STRING(self->source);
    sl_loader_t *l = NULL;
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_loader_create(src, &o, &l);
    if (rc) /* thread-local: read it on this thread */
        snprintf(msg, sizeof msg, "%s", sl_loader_last_error(NULL));
    Py_END_ALLOW_THREADS;
    if (rc)
        return (CoreObject *)slpy_raise(rc, msg, 1);
    return slpy_core_new(&loader_kind, l);
}

static int64_t engine_pos(LoaderObject *self)
{
    sl_position_t p = {0, 0};
    sl_loader_position(self->core->engine, &p);
    return p.epoch * self->nb + p.batch;
}

static PyObject *two_threads(void)
{
    return PyErr_Format(PyExc_RuntimeError,
                        "sluice.Loader used by two threads at once");
}

/* Before the engine restarts: nothing armed. Batches still held stay
 * valid across the restart (sl_loader_start keeps them the consumer's;
 * the pool grows past them, within the budget: next_batch). One engine
 * for the Loader's life: one telemetry file, one GPU stage, one memory
 * budget (a fresh engine for held batches had kept the old one running
 * beside it: its pipeline, its stage, its writes to the same file). */
static void stop_for_restart(LoaderObject *self)
{
    drop_pending(self);
    self->running = self->active = self->plan = 0;
}

/* Arms an iteration from batch g for self->epochs epochs. Under busy: the
 * GIL is released in core_create and sl_loader_start, and the Core is held
 * across sl_loader_start, so a close() meanwhile only drops the Loader's
 * reference (the engine dies after the call, here). */
static int start_at(LoaderObject *self, int64_t g)
{
    int64_t nb = self->nb;
    self->end_g = (g / nb + self->epochs) * nb;
    if (!self->opt.unordered && self->running && !self->plan &&
        (self->pending ? self->pending_g : engine_pos(self)) == g) {
        self->pos_g = g; /* the running pipeline is already there */
        self->active = 1;
        return 0;
    }
    stop_for_restart(self);
    CoreObject *core = self->core;
    Py_INCREF(core);
    sl_position_t p = {g / nb, g % nb};
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_loader_start(core->engine, &p);
    if (rc) /* thread-local: read it on this thread */
        snprintf(msg, sizeof msg, "%s", sl_loader_last_error(core->engine));
    Py_END_ALLOW_THREADS;
    int closed = self->core != core;
    Py_DECREF(core); /* the engine's end, if close() came meanwhile */
    if (rc) {
        slpy_raise(rc, msg, 1);
        return -1;
    }
    if (closed)
        return loader_closed(self) ? -1 : 0;
    self->running = self->active = 1;
    self->pos_g = g;
    return 0;
}

/* start_at, one thread at a time (with next()). */
static int do_start(LoaderObject *self, int64_t g)
{
    if (self->busy) {
        two_threads();
        return -1;
    }
    self->busy = 1;
    int rc = start_at(self, g);
    self->busy = 0;
    return rc;
}

/* Without a memory budget given, holding more batches than this says so
 * once: the pool grows with what is held (up to the engine's 4096
 * buffers, or the default budget from a cgroup's memory limit, which the
 * warning then names instead of asking for max_memory). */
#define SLPY_HELD_WARN 256

/* When the consumer holds every buffer, one more buffer first (with a
 * memory budget, never past it): the engine would wait for a release only
 * this thread can make, then fail. 0, or SL_ENOMEM with the warning past
 * SLPY_HELD_WARN turned into an error. */
static int grow_if_all_held(CoreObject *core, int budgeted)
{
    int64_t pf, lo, hi; /* the engine's limit, not a copy of it */
    if (sl_loader_get(core->engine, SL_PARAM_PREFETCH, &pf) ||
        core->held < pf ||
        sl_loader_param_range(core->engine, SL_PARAM_PREFETCH, &lo, &hi) ||
        pf >= hi || sl_loader_set(core->engine, SL_PARAM_PREFETCH, pf + 1))
        return 0;
    if (budgeted || pf + 1 != SLPY_HELD_WARN)
        return 0;
    const char *why = "";
    int64_t budget = sl__testing_memory_budget(core->engine, &why);
    char m[512]; /* PyErr_WarnFormat has no %f */
    if (budget > 0)
        snprintf(m, sizeof m,
                 "sluice.Loader: %d batches held, the pool grows with them "
                 "up to the memory budget of %.0f MB%s; release batches to "
                 "hold less",
                 SLPY_HELD_WARN, (double)budget / (1 << 20), why);
    else
        snprintf(m, sizeof m,
                 "sluice.Loader: %d batches held, the pool grows with them; "
                 "release batches or pass max_memory to bound it",
                 SLPY_HELD_WARN);
    int rc = PyErr_WarnEx(PyExc_ResourceWarning, m, 1);
    return rc ? SL_ENOMEM : 0;
}

/* sl_loader_next, in slices that let a signal in (Ctrl-C raises
 * KeyboardInterrupt within SLPY_SIGNAL_MS, not after the batch: SL_ESYSTEM
 * with the exception set; nothing is handed out, the position stays) and
 * that end after timeout_s seconds when it is > 0 (RuntimeError, as
 * torch's DataLoader(timeout=) raises); the pool grown first when every
 * buffer is held (SL_ESTATE then: held at a memory budget's limit). */
static int next_batch(CoreObject *core, const sl_batch_t **b, int budgeted,
                      double timeout_s)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double waited = 0;
    int rc = grow_if_all_held(core, budgeted);
    if (rc)
        return rc;
    do {
        int ms = SLPY_SIGNAL_MS;
        if (timeout_s > 0 && (timeout_s - waited) * 1000 < ms)
            ms = (int)((timeout_s - waited) * 1000) + 1;
        Py_BEGIN_ALLOW_THREADS;
        rc = sl_loader_next_timeout(core->engine, b, ms);
        Py_END_ALLOW_THREADS;
        if (rc == SL_ETIMEDOUT && PyErr_CheckSignals())
            return SL_ESYSTEM;
        clock_gettime(CLOCK_MONOTONIC, &t);
        waited = (double)(t.tv_sec - t0.tv_sec) +
                 (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
        if (rc == SL_ETIMEDOUT && timeout_s > 0 && waited >= timeout_s) {
            char m[128]; /* PyErr_Format has no %g */
            snprintf(m, sizeof m,
                     "sluice.Loader timed out after %g seconds waiting "
                     "for a batch (timeout=)",
                     timeout_s);
            PyErr_SetString(PyExc_RuntimeError, m);
            return SL_ETIMEDOUT;
        }
    } while (rc == SL_ETIMEDOUT);
    return rc;
}

static PyObject *loader_next(LoaderObject *self)
{
    if (!self->core && self->closed_mid)
        return slpy_closed_mid_iteration("sluice.Loader");
    if (!self->core || !self->active)
        return NULL; /* StopIteration */
    if (self->busy)
        return two_threads();
    const sl_batch_t *b = NULL;
    CoreObject *core = self->core;
    int64_t g;
    int ordered = !self->opt.unordered && !self->plan;
    if (ordered && self->pending) {
        g = self->pending_g;
        if (g >= self->end_g) {
            self->active = 0;
            return NULL;
        }
        b = self->pending;
        self->pending = NULL;
    } else {
        if (ordered && engine_pos(self) >= self->end_g) {
            self->active = 0;
            return NULL;
        }
        self->busy = 1;
        Py_INCREF(core); /* close() from another thread may drop it */
        int rc = next_batch(core, &b, self->opt.max_memory_bytes > 0,
                            self->timeout_s);
        self->busy = 0;
        if (!rc)
            core->held++;
        if (self->core != core) { /* closed (or restarted) meanwhile */
            if (!rc)
                slpy_core_release(core, b);
            Py_DECREF(core);
            return !self->core && self->closed_mid
                       ? slpy_closed_mid_iteration("sluice.Loader")
                       : NULL;
        }
        Py_DECREF(core);
        if (rc == SL_EEND) {
            self->active = 0;
            if (self->plan) /* a plain iteration restarts the engine */
                self->plan = self->running = 0;
            return NULL;
        }
        if (rc) {
            self->active = self->running = self->plan = 0;
            if (PyErr_Occurred()) /* a warning made an error */
                return NULL;
            return slpy_raise(rc, sl_loader_last_error(core->engine), 0);
        }
        g = b->epoch * self->nb + b->index;
        if (ordered && g >= self->end_g) {
            /* batches before it were all skipped: it opens the next
             * iteration */
            self->pending = b;
            self->pending_g = g;
            self->active = 0;
            return NULL;
        }
    }
    /* Unordered: a count of batches handed out, not a position, until the
     * epoch ends (sl_loader_start refuses it): a new iteration after a
     * break starts the next epoch, as torch's DataLoader does. */
    if (self->plan) {
        /* a side trip: the position stays */
    } else if (self->opt.unordered) {
        int64_t p = engine_pos(self);
        self->pos_g = (p + self->nb - 1) / self->nb * self->nb;
    } else {
        self->pos_g = g + 1;
    }
    return make_batch(core, b);
}

static PyObject *loader_iter(LoaderObject *self)
{
    if (loader_closed(self))
        return NULL;
    if (!self->active && do_start(self, self->pos_g))
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *loader_start(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"epoch", "batch", NULL};
    long long e = 0, b = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|LL", kwlist, &e, &b))
        return NULL;
    if (loader_closed(self))
        return NULL;
    if (e < 0 || b < 0 || b > self->nb)
        return PyErr_Format(PyExc_ValueError,
                            "position (%lld, %lld) is outside epoch >= 0, "
                            "batch 0..%lld",
                            e, b, (long long)self->nb);
    if (do_start(self, e * self->nb + b))
        return NULL;
    Py_RETURN_NONE;
}

/* The plan's (epoch, batch) pairs from a sequence of 2-sequences; NULL
 * with an exception set. The caller PyMem_Frees it. */
static sl_position_t *plan_list(PyObject *batches, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(batches, "batches must be a sequence of "
                                             "(epoch, batch) pairs");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    sl_position_t *v = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (!v) {
        Py_DECREF(seq);
        return (sl_position_t *)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long long e, b;
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(it) && !PyList_Check(it)) {
            PyErr_Format(PyExc_TypeError,
                         "batches[%zd] must be an (epoch, batch) pair, not %R",
                         i, it);
            goto fail;
        }
        PyObject *t = PySequence_Tuple(it);
        int ok = t && PyArg_ParseTuple(t, "LL", &e, &b);
        Py_XDECREF(t);
        if (!ok) {
            PyErr_Format(PyExc_TypeError,
                         "batches[%zd] must be an (epoch, batch) pair of "
                         "ints, not %R",
                         i, it);
            goto fail;
        }
        v[i] = (sl_position_t){e, b};
    }
    Py_DECREF(seq);
    return v;
fail:
    Py_DECREF(seq);
    PyMem_Free(v);
    return NULL;
}

/* Restarts the engine on plan p (start_plan's work, under busy). */
static int plan_start(LoaderObject *self, const sl_plan_t *p)
{
    stop_for_restart(self);
    CoreObject *core = self->core;
    Py_INCREF(core);
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_loader_start_plan(core->engine, p);
    if (rc) /* thread-local: read it on this thread */
        snprintf(msg, sizeof msg, "%s", sl_loader_last_error(core->engine));
    Py_END_ALLOW_THREADS;
    int closed = self->core != core;
    Py_DECREF(core);
    if (rc) {
        /* a bad plan is the caller's value, not the engine's failure */
        if (rc == SL_ERANGE || rc == SL_EINVAL)
            PyErr_SetString(PyExc_ValueError, msg);
        else
            slpy_raise(rc, msg, 1);
        return -1;
    }
    if (closed)
        return loader_closed(self) ? -1 : 0;
    self->active = self->plan = 1;
    return 0;
}

static PyObject *loader_start_plan(LoaderObject *self, PyObject *args,
                                   PyObject *kw)
{
    static char *kwlist[] = {"batches", "first", "step", "count", NULL};
    PyObject *batches = Py_None;
    long long fe = -1, fb = -1, step = 1, count = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$(LL)LL", kwlist, &batches,
                                     &fe, &fb, &step, &count))
        return NULL;
    if (loader_closed(self))
        return NULL;
    if ((batches == Py_None) == (count < 0 && fe < 0))
        return PyErr_Format(PyExc_TypeError,
                            "start_plan needs either batches (a list of "
                            "(epoch, batch) pairs) or first=(epoch, batch) "
                            "and count=");
    sl_plan_t p;
    sl_plan_init(&p);
    sl_position_t *list = NULL;
    if (batches != Py_None) {
        Py_ssize_t n;
        if (!(list = plan_list(batches, &n)))
            return NULL;
        p.batches = list;
        p.count = n;
    } else {
        if (fe < 0 && fb < 0)
            fe = fb = 0;
        if (step < 1) /* the engine's 0 is its default, 1 */
            return PyErr_Format(PyExc_ValueError,
                                "plan range: step %lld is not >= 1", step);
        p.first = (sl_position_t){fe, fb};
        p.step = step;
        p.count = count;
    }
    int rc = -1;
    if (self->busy)
        two_threads();
    else {
        self->busy = 1;
        rc = plan_start(self, &p);
        self->busy = 0;
    }
    PyMem_Free(list);
    if (rc)
        return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t loader_len(LoaderObject *self)
{
    return (Py_ssize_t)(self->nb * self->epochs);
}

/* The knobs set() and get() take (knob_of), named once for the docstring
 * and the error. */
#define LOADER_KNOBS                                                           \
    "'threads', 'read_threads', 'prefetch', 'io_depth', 'cache_bytes' or "     \
    "'gpu_share'"

static int knob_of(PyObject *name, sl_param_t *p)
{
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s && (!strcmp(s, "threads") || !strcmp(s, "decode_threads")))
        *p = SL_PARAM_DECODE_THREADS;
    else if (s && (!strcmp(s, "read_threads") || !strcmp(s, "read-threads")))
        *p = SL_PARAM_READ_THREADS;
    else if (s && !strcmp(s, "prefetch"))
        *p = SL_PARAM_PREFETCH;
    else if (s && (!strcmp(s, "io_depth") || !strcmp(s, "io-depth")))
        *p = SL_PARAM_IO_DEPTH;
    else if (s && !strcmp(s, "cache_bytes"))
        *p = SL_PARAM_CACHE_BYTES;
    else if (s && (!strcmp(s, "gpu_share") || !strcmp(s, "gpu-share")))
        *p = SL_PARAM_GPU_SHARE;
    else {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "knob must be " LOADER_KNOBS ", not %R",
                     name);
        return -1;
    }
    return 0;
}

static PyObject *loader_set(LoaderObject *self, PyObject *args)
{
    PyObject *name, *val;
    sl_param_t p;
    if (!PyArg_ParseTuple(args, "OO:set", &name, &val) || loader_closed(self) ||
        knob_of(name, &p))
        return NULL;
    long long v = SL_AUTOTUNE; /* None: the default (the scheduler's) */
    if (val != Py_None) {
        v = PyLong_AsLongLong(val);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        int lo = p == SL_PARAM_CACHE_BYTES || p == SL_PARAM_GPU_SHARE ? 0 : 1;
        if (v < lo)
            return PyErr_Format(PyExc_ValueError, "%R must be >= %d", name, lo);
    }
    /* Any thread, beside next(): the Core is held across the call, so a
     * close() meanwhile frees the engine only after it, here. */
    CoreObject *core = self->core;
    Py_INCREF(core);
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS; /* may start threads */
    rc = sl_loader_set(core->engine, p, v);
    if (rc)
        snprintf(msg, sizeof msg, "%s", sl_loader_last_error(core->engine));
    Py_END_ALLOW_THREADS;
    Py_DECREF(core);
    if (rc)
        return slpy_raise(rc, msg, 1);
    Py_RETURN_NONE;
}

static PyObject *loader_get(LoaderObject *self, PyObject *name)
{
    sl_param_t p;
    int64_t v;
    if (loader_closed(self) || knob_of(name, &p))
        return NULL;
    int rc = sl_loader_get(self->core->engine, p, &v);
    if (rc)
        return slpy_raise(rc, NULL, 1);
    return PyLong_FromLongLong(v);
}

static PyObject *snapshot_dict(sl_loader_t *l)
{
    sl_snapshot_t *s = PyMem_Malloc(sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    sl_snapshot_init(s);
    if (sl_loader_snapshot(l, s) || s->t == 0) { /* off, or no tick yet */
        PyMem_Free(s);
        Py_RETURN_NONE;
    }
    int n = sl_snapshot_json(s, NULL, 0);
    char *buf = n > 0 ? PyMem_Malloc((size_t)n + 1) : NULL;
    if (buf)
        sl_snapshot_json(s, buf, (size_t)n + 1);
    PyMem_Free(s);
    if (!buf)
        return PyErr_NoMemory();
    PyObject *json = PyImport_ImportModule("json");
    PyObject *d = json ? PyObject_CallMethod(json, "loads", "s", buf) : NULL;
    Py_XDECREF(json);
    PyMem_Free(buf);
    return d;
}

const char *const slpy_cache_codec_names[6] = {"auto",   "none",   "lz4",
                                               "zstd-1", "zstd-3", "zstd-19"};

static PyObject *loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_closed(self))
        return NULL;
    sl_loader_t *l = self->core->engine;
    sl_stats_t st;
    sl_stats_init(&st);
    int64_t th = 0, rt = 0, pf = 0;
    sl_loader_stats(l, &st);
    sl_loader_get(l, SL_PARAM_DECODE_THREADS, &th);
    sl_loader_get(l, SL_PARAM_READ_THREADS, &rt);
    sl_loader_get(l, SL_PARAM_PREFETCH, &pf);
    PyObject *tel = snapshot_dict(l);
    if (!tel)
        return NULL;
    PyObject *cache = Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:s,s:L}", "hits", (long long)st.cache_hits,
        "misses", (long long)st.cache_misses, "bytes",
        (long long)st.cache_bytes, "entries", (long long)st.cache_entries,
        "raw_bytes", (long long)st.cache_raw_bytes, "codec",
        st.cache_codec >= 1 && st.cache_codec <= 5
            ? slpy_cache_codec_names[st.cache_codec]
            : "?",
        "codec_choices", (long long)st.cache_codec_choices);
    if (!cache) {
        Py_DECREF(tel);
        return NULL;
    }
    if (st.cache_disk_bytes > 0 || self->opt.cache_disk_bytes > 0) {
        PyObject *disk = Py_BuildValue(
            "{s:L,s:L,s:L,s:L,s:L}", "hits", (long long)st.cache_disk_hits,
            "misses", (long long)st.cache_disk_misses, "bytes",
            (long long)st.cache_disk_bytes, "entries",
            (long long)st.cache_disk_entries, "errors",
            (long long)st.cache_disk_errors);
        if (!disk || PyDict_SetItemString(cache, "disk", disk)) {
            Py_XDECREF(disk);
            Py_DECREF(tel);
            Py_DECREF(cache);
            return NULL;
        }
        Py_DECREF(disk);
    }
    PyObject *reqs =
        Py_BuildValue("{s:L,s:L,s:L}", "count", (long long)st.requests,
                      "records", (long long)st.request_records, "fallbacks",
                      (long long)st.request_fallbacks);
    if (!reqs) {
        Py_DECREF(tel);
        Py_DECREF(cache);
        return NULL;
    }
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:d,s:L,s:L,s:L,s:L,s:L,s:i,s:N,s:N,s:N}", "samples",
        (long long)st.samples, "batches", (long long)st.batches,
        "errors_skipped", (long long)st.errors_skipped, "bytes_read",
        (long long)st.bytes_read, "wait_s", (double)st.wait_ns / 1e9, "threads",
        (long long)th, "read_threads", (long long)rt, "prefetch", (long long)pf,
        "epoch", (long long)(self->pos_g / self->nb), "batch",
        (long long)(self->pos_g % self->nb), "batches_held", self->core->held,
        "telemetry", tel, "cache", cache, "requests", reqs);
}

static PyObject *loader_skipped(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_closed(self))
        return NULL;
    return slpy_skipped_list(self->core);
}

static PyObject *loader_close(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (self->core) {
        drop_pending(self);
        self->closed_mid = self->active;
        self->active = self->running = 0;
        Py_CLEAR(self->core); /* the engine goes with the last batch */
    }
    Py_RETURN_NONE;
}

static PyObject *loader_exit(LoaderObject *self, PyObject *args)
{
    (void)args;
    return loader_close(self, NULL);
}

static void loader_dealloc(LoaderObject *self)
{
    if (self->core)
        drop_pending(self);
    Py_CLEAR(self->core);
    Py_CLEAR(self->source);
    Py_CLEAR(self->telemetry_path);
    Py_CLEAR(self->policy_file);
    Py_CLEAR(self->cache_dir);
    Py_CLEAR(self->classes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ------------------------------------------------------------ properties */

static PyObject *get_num_samples(LoaderObject *self, void *c)
{
    (void)c;
    if (loader_closed(self))
        return NULL;
    return PyLong_FromLongLong(sl_loader_num_samples(self->core->engine));
}

static PyObject *get_num_classes(LoaderObject *self, void *c)
{
    (void)c;
    if (loader_closed(self))
        return NULL;
    return PyLong_FromLong(sl_loader_num_classes(self->core->engine));
}

static PyObject *get_classes(LoaderObject *self, void *c)
{
    (void)c;
    if (!self->classes) {
        if (loader_closed(self))
            return NULL;
        int n = sl_loader_num_classes(self->core->engine);
        PyObject *t = PyTuple_New(n);
        for (int i = 0; t && i < n; i++) {
            const char *s = sl_loader_class_name(self->core->engine, i);
            PyObject *u = PyUnicode_DecodeFSDefault(s ? s : "");
            if (!u)
                Py_CLEAR(t);
            else
                PyTuple_SET_ITEM(t, i, u);
        }
        self->classes = t;
    }
    Py_XINCREF(self->classes);
    return self->classes;
}

static PyObject *get_position(LoaderObject *self, void *c)
{
    (void)c;
    return Py_BuildValue("(LL)", (long long)(self->pos_g / self->nb),
                         (long long)(self->pos_g % self->nb));
}

static PyObject *get_batch_bytes(LoaderObject *self, void *c)
{
    (void)c;
    if (loader_closed(self))
        return NULL;
    return PyLong_FromSize_t(sl_loader_batch_bytes(self->core->engine));
}

static PyObject *get_closed(LoaderObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->core == NULL);
}

static PyObject *get_options(LoaderObject *self, void *c)
{
    (void)c;
    sl_options_t used; /* the engine's, defaults resolved, when open */
    sl_options_init(&used);
    const sl_options_t *o =
        self->core && !sl_loader_options(self->core->engine, &used)
            ? &used
            : &self->opt;
    return Py_BuildValue(
        "{s:i,s:i,s:s,s:s,s:s,s:O,s:K,s:O,s:i,s:i,s:L,s:O,s:s,s:s,s:s,s:i,s:i,"
        "s:O,s:L}",
        "batch_size", o->batch_size, "image_size", o->image_size, "mode",
        o->mode ? "eval" : "train", "dtype", o->dtype ? "float32" : "uint8",
        "layout", o->layout ? "hwc" : "chw", "shuffle",
        o->no_shuffle ? Py_False : Py_True, "seed", (unsigned long long)o->seed,
        "drop_last", o->drop_last ? Py_True : Py_False, "rank", o->rank,
        "world_size", o->world_size, "epochs", (long long)self->epochs,
        "unordered", o->unordered ? Py_True : Py_False, "on_error",
        o->on_error ? "skip" : "fail", "policy",
        o->policy == SL_POLICY_STATIC ? "static"
        : o->policy == SL_POLICY_RL   ? "rl"
                                      : "heuristic",
        "placement",
        o->placement == SL_PLACEMENT_CPU   ? "cpu"
        : o->placement == SL_PLACEMENT_GPU ? "gpu"
                                           : "auto",
        "gpu_share", o->gpu_share, "gpu_device", o->gpu_device,
        "device_batches", o->device_batches ? Py_True : Py_False,
        "gpu_memory_bytes", (long long)o->gpu_memory_bytes);
}

#define INT_GETTER(fname, expr)                                                \
    static PyObject *fname(LoaderObject *self, void *c)                        \
    {                                                                          \
        (void)c;                                                               \
        return PyLong_FromLongLong((long long)(expr));                         \
    }
INT_GETTER(get_batches_per_epoch, self->nb)
INT_GETTER(get_epochs, self->epochs)
INT_GETTER(get_batch_size, self->opt.batch_size)
INT_GETTER(get_seed, self->opt.seed)
INT_GETTER(get_rank, self->opt.rank)
INT_GETTER(get_world_size, self->opt.world_size)

static PyGetSetDef loader_getset[] = {
    {"num_samples", (getter)get_num_samples, NULL,
     "Samples in the whole source (all ranks).", NULL},
    {"num_classes", (getter)get_num_classes, NULL, "Number of classes.", NULL},
    {"classes", (getter)get_classes, NULL,
     "Class names, index order (sorted folder names).", NULL},
    {"batches_per_epoch", (getter)get_batches_per_epoch, NULL,
     "Batches this rank gets each epoch.", NULL},
    {"batch_bytes", (getter)get_batch_bytes, NULL,
     "Bytes of one full batch's image buffer.", NULL},
    {"position", (getter)get_position, NULL,
     "(epoch, batch) of the next batch to yield: start(*position) in a new "
     "Loader with the same options resumes exactly there (ordered mode).",
     NULL},
    {"epochs", (getter)get_epochs, NULL, "Epochs one iteration streams.", NULL},
    {"batch_size", (getter)get_batch_size, NULL, NULL, NULL},
    {"seed", (getter)get_seed, NULL, NULL, NULL},
    {"rank", (getter)get_rank, NULL, NULL, NULL},
    {"world_size", (getter)get_world_size, NULL, NULL, NULL},
    {"closed", (getter)get_closed, NULL, NULL, NULL},
    {"options", (getter)get_options, NULL,
     "The options the loader was made with, as a dict.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---- a partitioned cache across processes (sluice.ray partition=) ---- */

static PyObject *loader_batch_samples(LoaderObject *self, PyObject *args)
{
    long long e, b;
    if (!PyArg_ParseTuple(args, "LL:batch_samples", &e, &b) ||
        loader_closed(self))
        return NULL;
    int64_t *out = PyMem_Malloc((size_t)self->opt.batch_size * sizeof *out);
    if (!out)
        return PyErr_NoMemory();
    int k = sl_loader_batch_samples(self->core->engine, e, b, out);
    PyObject *r = NULL;
    if (k < 0)
        PyErr_Format(k == SL_ERANGE ? PyExc_ValueError : PyExc_MemoryError,
                     "batch_samples: (epoch %lld, batch %lld): %s", e, b,
                     sl_strerror(k));
    else if ((r = PyList_New(k)))
        for (int i = 0; i < k; i++)
            PyList_SET_ITEM(r, i, PyLong_FromLongLong(out[i]));
    PyMem_Free(out);
    return r;
}

static PyObject *loader_read_sample(LoaderObject *self, PyObject *args,
                                    PyObject *kw)
{
    static char *kwlist[] = {"sample", "fill", NULL};
    long long i;
    int fill = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|p:read_sample", kwlist, &i,
                                     &fill) ||
        loader_closed(self))
        return NULL;
    CoreObject *core = self->core;
    Py_INCREF(core);
    void *data = NULL;
    size_t n = 0;
    int hit = 0, rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS; /* a read, maybe a slow one */
    rc = sl_loader_read_sample(core->engine, i, fill, &data, &n, &hit, msg,
                               sizeof msg);
    Py_END_ALLOW_THREADS;
    Py_DECREF(core);
    if (rc)
        return slpy_raise(rc, msg, 0);
    PyObject *r = Py_BuildValue("(y#O)", (const char *)data, (Py_ssize_t)n,
                                hit ? Py_True : Py_False);
    sl_free(data);
    return r;
}

static PyObject *loader_cache_lend(LoaderObject *self, PyObject *args)
{
    long long i;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "Ly*:cache_lend", &i, &buf))
        return NULL;
    int ok = 0;
    if (!loader_closed(self))
        ok = sl_loader_cache_lend(self->core->engine, i, buf.buf,
                                  (size_t)buf.len);
    PyBuffer_Release(&buf);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(ok);
}

static PyObject *loader_cache_lend_clear(LoaderObject *self,
                                         PyObject *Py_UNUSED(ignored))
{
    if (loader_closed(self))
        return NULL;
    return PyLong_FromLongLong(sl_loader_cache_lend_clear(self->core->engine));
}

/* Emulated slow storage (sluice/testing.h), for tests and benchmarks. */
static PyObject *loader_testing_storage(LoaderObject *self, PyObject *args)
{
    long long lat = 0, bps = 0;
    if (!PyArg_ParseTuple(args, "LL:_testing_storage", &lat, &bps) ||
        loader_closed(self))
        return NULL;
    sl_loader_t *l = self->core->engine;
    int rc = sl__testing_storage_set(l, SL_TESTING_READ_LATENCY_US, lat);
    if (!rc)
        rc = sl__testing_storage_set(l, SL_TESTING_READ_BYTES_PER_S, bps);
    if (rc)
        return slpy_raise(rc, "emulated storage: value out of range", 1);
    Py_RETURN_NONE;
}

static PyMethodDef loader_methods[] = {
    {"start", (PyCFunction)(void (*)(void))loader_start,
     METH_VARARGS | METH_KEYWORDS,
     "start(epoch=0, batch=0)\n--\n\nThe next iteration yields from "
     "(epoch, batch) to the end of epoch + epochs - 1."},
    {"start_plan", (PyCFunction)(void (*)(void))loader_start_plan,
     METH_VARARGS | METH_KEYWORDS,
     "start_plan(batches=None, *, first=None, step=1, count=None)\n--\n\n"
     "The next iteration yields the planned batches, in the plan's order, "
     "then ends:\nbatches, a list of (epoch, batch) pairs, or the range "
     "first=(epoch, batch),\nstep, count (batch numbers first + i * step "
     "going on into the next epochs).\nEach batch is the one a plain "
     "iteration yields at that (epoch, batch), byte for\nbyte. A plan does "
     "not move `position`: the next plain iteration continues\nwhere it "
     "was. ValueError for an empty plan or a batch outside the epochs."},
    {"set", (PyCFunction)loader_set, METH_VARARGS,
     "set(knob, value)\n--\n\nSets " LOADER_KNOBS " while batches flow "
     "(None: the default). Any thread."},
    {"get", (PyCFunction)loader_get, METH_O,
     "get(knob)\n--\n\nThe knob's value in force."},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS,
     "stats()\n--\n\nCounters, knobs, position and the latest telemetry "
     "snapshot (dict under 'telemetry', None before the first tick)."},
    {"skipped", (PyCFunction)loader_skipped, METH_NOARGS,
     "skipped()\n--\n\nMessages of the samples skipped (on_error='skip')."},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "close()\n--\n\nStops iteration (an iteration under way raises "
     "ValueError at its next\nbatch). The engine is freed when the last "
     "batch array is gone too."},
    {"batch_samples", (PyCFunction)loader_batch_samples, METH_VARARGS,
     "batch_samples(epoch, batch)\n--\n\nThe dataset indices batch "
     "(epoch, batch) reads on this rank, in slot order."},
    {"read_sample", (PyCFunction)(void (*)(void))loader_read_sample,
     METH_VARARGS | METH_KEYWORDS,
     "read_sample(sample, fill=True)\n--\n\n(bytes, hit): the sample's "
     "encoded bytes from the sample cache, or read\nfrom storage (and "
     "offered to the cache with fill). Any thread."},
    {"cache_lend", (PyCFunction)loader_cache_lend, METH_VARARGS,
     "cache_lend(sample, data)\n--\n\nThe next read of sample takes data "
     "(its encoded bytes, from another\nprocess's cache) instead of "
     "storage, once. True when lent. Any thread."},
    {"cache_lend_clear", (PyCFunction)loader_cache_lend_clear, METH_NOARGS,
     "cache_lend_clear()\n--\n\nDrops the lent samples no read took; "
     "returns how many."},
    {"_testing_storage", (PyCFunction)loader_testing_storage, METH_VARARGS,
     "_testing_storage(latency_us, bytes_per_s)\n--\n\nEmulated slow "
     "storage (tests, benchmarks): 0 turns a part off."},
    {"__enter__", (PyCFunction)slpy_return_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)loader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods loader_as_seq = {.sq_length = (lenfunc)loader_len};

PyDoc_STRVAR(
    loader_doc,
    "Loader(source, batch_size=64, image_size=224, *, mode='train', "
    "dtype='uint8', layout='chw', shuffle=True, seed=0, drop_last=False, "
    "rank=0, world_size=1, epochs=1, unordered=False, on_error='fail', "
    "threads=None, read_threads=None, prefetch=None, dct_scale=True, "
    "mean=None, std=None, telemetry_ms=None, telemetry_path=None, "
    "metrics_port=None, flip=True, scale=None, ratio=None, "
    "resize_size=None, host_alloc=None, policy=None, max_memory=None, "
    "shuffle_buffer=0, cache_bytes=None, cache_policy='minio', "
    "cache_decoded=False, cache_codec='auto', io_depth=None, "
    "max_threads=None, policy_file=None, placement=None, gpu_share=None, "
    "coalesce=None, gpu_device=None, device_batches=False, cache_dir=None, "
    "cache_disk_bytes=None, gpu_memory_bytes=None, timeout=0)"
    "\n--\n\n"
    "Streams (images, labels) numpy batches from an ImageFolder tree, "
    "packed shards,\nWebDataset .tar shards or TFRecord files (one path or "
    "a brace pattern,\n'shard-{000..009}.tar'). shuffle_buffer=N: "
    "WebDataset's order (files shuffled,\nsamples through an N-sample "
    "buffer) instead of a global permutation.\n\n"
    "The arrays are views of the engine's batch buffer (no copy); the "
    "buffer goes back\nto the pool when both arrays are gone. One "
    "iteration streams `epochs` epochs;\nthe next iteration continues "
    "where it ended (next epoch, new shuffle). len()\nis batches_per_epoch "
    "* epochs. Holding every buffer (e.g. list(loader)) grows\nthe "
    "prefetch depth by one buffer each time, so memory grows with what is "
    "held\n(a ResourceWarning past 256 batches). max_memory (bytes) bounds "
    "the process's\nloader memory: batch buffers, read-ahead and decode "
    "scratch; a sample that\ncannot fit is an error naming it, and holding "
    "more batches than fit fails\nnext() (default: half the cgroup's "
    "memory limit, plus cache_bytes, in a container that\nhas one, else "
    "none). cache_bytes keeps "
    "samples in "
    "memory across epochs (taken out of\nmax_memory; cache_policy 'minio' "
    "or 'lru'; cache_decoded=True: decoded images,\nthe dct_scale=False "
    "stream; cache_codec: how entries are stored, 'auto' chosen at run "
    "time);\nstats()['cache'] counts hits and misses. io_depth: reads in "
    "flight (int, or 'off'\nfor one blocking read per read thread); "
    "max_threads: the CPU thread budget\n(decode threads + 1); "
    "policy_file: policy='rl' weights (as sluice run's\n--policy-file). "
    "coalesce: the most bytes one range request fetches for\nneighbouring "
    "remote records (None: 1 MiB; 'off': one request a record);\n"
    "stats()['requests'] counts requests, the records they fetched and "
    "the\ncoalesced ones that failed (read again one by one). cache_dir, "
    "cache_disk_bytes:\nthe cache's disk tier: samples the memory tier "
    "has no room for kept in a\nfresh subdirectory of cache_dir (removed "
    "when the loader closes), within\ncache_disk_bytes; "
    "stats()['cache']['disk'] counts its hits, misses, bytes and\nerrors.\n\n"
    "telemetry_ms: the telemetry period (None: 100 ms); the scheduler "
    "decides every\n5 periods, so 0 (no telemetry) also means no scheduler: "
    "the knobs stay where\nset.\n\n"
    "placement: where samples are decoded: 'gpu' (nvJPEG and CUDA kernels "
    "on the\nGPU stage; fails naming why where it cannot run), 'cpu', or "
    "None / 'auto' (the\nstage where the driver sees a GPU and the "
    "scheduler places, else the CPU,\nsaying why in "
    "stats()['telemetry']['placement']['why']). gpu_share: per mille\nof "
    "each batch on the stage (gpu: 1000; auto: the scheduler's, from 0; "
    "also\nloader.set('gpu_share', v)). gpu_device: the CUDA device (0). "
    "device_batches=True:\nbatches stay in the stage's GPU memory, the "
    "images an object with\n__cuda_array_interface__ (sluice.torch makes "
    "CUDA tensors of them without a\ncopy). gpu_memory_bytes: a hard "
    "budget of GPU memory for the stage and device\nbatches (None: 1 GiB "
    "for the stage). timeout: seconds next() waits for a batch\nbefore "
    "it raises RuntimeError (0: as long as it takes), as torch's\n"
    "DataLoader(timeout=). Ctrl-C interrupts a waiting next() at once.");

static PyTypeObject Loader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = loader_doc,
    .tp_iter = (getiterfunc)loader_iter,
    .tp_iternext = (iternextfunc)loader_next,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_as_sequence = &loader_as_seq,
    .tp_new = slpy_loader_new,
};

int slpy_loader_init(PyObject *m)
{
    if (slpy_kind_ready(&loader_kind) || PyType_Ready(&Loader_Type))
        return -1;
    Py_INCREF(&Loader_Type);
    if (PyModule_AddObject(m, "Loader", (PyObject *)&Loader_Type)) {
        Py_DECREF(&Loader_Type);
        return -1;
    }
    return 0;
}
