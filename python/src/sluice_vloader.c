/*
 * sluice._sluice: VolumeLoader, the 3-D U-Net patch loader
 * (sluice/vloader.h). next() waits without the GIL and returns copies
 * (numpy arrays the caller owns); the engine's buffer goes back at once.
 * One thread at a time per loader (a second concurrent call raises).
 */
#include "sluice_py.h"

#include <limits.h>
#include <sluice/vloader.h>

typedef struct {
    PyObject_HEAD sl_vloader_t *l;
    int busy;
} vloader_obj;

static void vl_dealloc(vloader_obj *self)
{
    if (self->l) {
        sl_vloader_t *l = self->l;
        self->l = NULL;
        Py_BEGIN_ALLOW_THREADS;
        sl_vloader_destroy(l);
        Py_END_ALLOW_THREADS;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Three items of a sequence, each through one(item, what, v, i): -1 with
 * the Python error set, else 0. */
typedef int (*item_fn)(PyObject *x, const char *what, void *v, int i);
static int parse_x3(PyObject *o, const char *what, item_fn one, void *v)
{
    PyObject *s = PySequence_Fast(o, what);
    if (!s)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(s) != 3) {
        PyErr_Format(PyExc_ValueError, "%s: three values", what);
    } else {
        rc = 0;
        for (int i = 0; i < 3 && !rc; i++)
            rc = one(PySequence_Fast_GET_ITEM(s, i), what, v, i);
    }
    Py_DECREF(s);
    return rc;
}

/* A patch edge: an int in 1..4096. */
static int patch_edge(PyObject *x, const char *what, void *v, int i)
{
    long long n = PyLong_AsLongLong(x);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < 1 || n > 4096) {
        PyErr_Format(PyExc_ValueError, "%s: 1..4096 each", what);
        return -1;
    }
    ((int64_t *)v)[i] = n;
    return 0;
}

/* A number as a double (the options' type: a float32 step would move a
 * spacing ratio that lands on a whole number, 1 / 1.2 x 120 = 100, to
 * 99.999996, truncated to 99 slices). */
static int as_double(PyObject *x, const char *what, void *v, int i)
{
    (void)what;
    double d = PyFloat_AsDouble(x);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    ((double *)v)[i] = d;
    return 0;
}

static int vl_init(vloader_obj *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {
        "dataset",        "batch_size",   "patch",     "seed",
        "threads",        "prefetch",     "balance",   "cache_bytes",
        "target_spacing", "oversampling", "flip_prob", "brightness_prob",
        "noise_prob",     "memory_bytes", "bfloat16",  "on_error",
        "unlabeled",      "start",        NULL};
    PyObject *path, *patch = NULL, *spacing = NULL, *batch_o = NULL;
    PyObject *cache_o = Py_None;
    sl_vloader_options_t o;
    sl_vloader_options_init(&o);
    unsigned long long seed = 0;
    PyObject *seed_o = Py_None;
    int balance = 1;
    long long memory = 0, start = 0;
    int bf16 = 0, unlabeled = 0;
    const char *on_error = "fail";
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O|OOOiipOOddddLpspL", kwlist, &path, &batch_o, &patch,
            &seed_o, &o.threads, &o.prefetch, &balance, &cache_o, &spacing,
            &o.aug.oversampling, &o.aug.flip_prob, &o.aug.brightness_prob,
            &o.aug.noise_prob, &memory, &bf16, &on_error, &unlabeled, &start))
        return -1;
    o.start = start;
    if (strcmp(on_error, "fail") && strcmp(on_error, "skip")) {
        PyErr_Format(PyExc_ValueError, "on_error '%s': 'fail' or 'skip'",
                     on_error);
        return -1;
    }
    if (slpy_parse_seed(seed_o, &seed))
        return -1;
    o.on_error = strcmp(on_error, "skip") ? SL_ON_ERROR_FAIL : SL_ON_ERROR_SKIP;
    o.unlabeled = unlabeled;
    if (patch && parse_x3(patch, "patch", patch_edge, o.aug.patch))
        return -1;
    if (spacing) {
        if (parse_x3(spacing, "target_spacing", as_double, o.target_spacing))
            return -1;
        for (int i = 0; i < 3; i++)
            if (!(o.target_spacing[i] > 0)) { /* C's 0 is its default */
                PyErr_Format(PyExc_ValueError,
                             "target_spacing %R: voxel sizes in mm, > 0",
                             spacing);
                return -1;
            }
    }
    /* batch_size: given, at least 1, as sluice.torch and sluice.Loader take
     * it (C's 0, "the default", is the argument left out). cache_bytes:
     * None is C's default (2 GiB); 0 means no cache, as for the image
     * loader: a 1-byte bound keeps only the cases in use, each given back
     * once its patches are made (exec/vloader_cache.c). */
    long long cache = 0;
    if (batch_o) {
        long v = PyLong_AsLong(batch_o);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < 1 || v > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "batch_size %ld: >= 1", v);
            return -1;
        }
        o.batch_size = (int)v;
    }
    if (cache_o != Py_None) {
        cache = PyLong_AsLongLong(cache_o);
        if (cache == -1 && PyErr_Occurred())
            return -1;
        if (cache == 0)
            cache = 1;
    }
    if (o.threads < 0 || o.prefetch < 0 || cache < 0 || memory < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "threads, prefetch, cache_bytes, memory_bytes >= 0");
        return -1;
    }
    o.memory_bytes = memory;
    o.image_bf16 = bf16;
    o.seed = seed;
    o.no_balance = !balance;
    o.cache_bytes = cache;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(path, &b))
        return -1;
    char err[1024] = "";
    sl_vloader_t *l = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_vloader_create(PyBytes_AS_STRING(b), &o, &l, err, sizeof err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(b);
    if (rc) {
        slpy_raise(rc, err, rc == SL_EINVAL);
        return -1;
    }
    if (self->l)
        sl_vloader_destroy(self->l);
    self->l = l;
    return 0;
}

static int vl_ready(vloader_obj *self)
{
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "VolumeLoader is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "VolumeLoader: used from two threads at once");
        return -1;
    }
    return 0;
}

static PyObject *copy_out(const void *src, int n, const int64_t d[3], int type,
                          size_t es)
{
    npy_intp dims[5] = {n, 1, (npy_intp)d[0], (npy_intp)d[1], (npy_intp)d[2]};
    PyObject *a = PyArray_SimpleNew(5, dims, type);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), src,
               (size_t)n * (size_t)(d[0] * d[1] * d[2]) * es);
    return a;
}

static PyObject *vl_next(vloader_obj *self, PyObject *unused)
{
    (void)unused;
    if (vl_ready(self))
        return NULL;
    self->busy = 1;
    sl_vbatch_t *b = NULL;
    char err[1024] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_vloader_next(self->l, &b, err, sizeof err);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (rc)
        return slpy_raise(rc, err, 0);
    /* bfloat16: its bits as uint16 (NumPy has no bfloat16; the Python
     * layer views them as torch.bfloat16) */
    PyObject *img = b->image_bf16
                        ? copy_out(b->image_bf16, b->n, b->dims, NPY_UINT16, 2)
                        : copy_out(b->image, b->n, b->dims, NPY_FLOAT32, 4);
    const char *dtype = b->image_bf16 ? "bfloat16" : "float32";
    PyObject *lbl = copy_out(b->label, b->n, b->dims, NPY_UINT8, 1);
    npy_intp nc = b->n;
    PyObject *cases = PyArray_SimpleNew(1, &nc, NPY_INT64);
    if (cases)
        memcpy(PyArray_DATA((PyArrayObject *)cases), b->cases,
               (size_t)b->n * sizeof *b->cases);
    long long epoch = b->epoch, index = b->index;
    sl_vloader_release(self->l, b);
    if (!img || !lbl || !cases) {
        Py_XDECREF(img);
        Py_XDECREF(lbl);
        Py_XDECREF(cases);
        return NULL;
    }
    return Py_BuildValue("{s:L,s:L,s:N,s:N,s:N,s:s}", "epoch", epoch, "index",
                         index, "image", img, "label", lbl, "cases", cases,
                         "dtype", dtype);
}

static PyObject *vl_stats(vloader_obj *self, PyObject *unused)
{
    (void)unused;
    if (vl_ready(self))
        return NULL;
    sl_vloader_stats_t s = {.size = sizeof s};
    sl_vloader_stats(self->l, &s);
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:d,s:d,s:d,s:d,s:d,s:L,s:L,s:L,s:L,s:L,s:L}",
        "batches", (long long)s.batches, "samples", (long long)s.samples,
        "offline_runs", (long long)s.offline_runs, "cache_hits",
        (long long)s.cache_hits, "cache_bytes", (long long)s.cache_bytes,
        "wait_s", s.wait_ns / 1e9, "predicted_s", s.predicted_ns / 1e9,
        "actual_s", s.actual_ns / 1e9, "latency_p50_s", s.latency_p50_ns / 1e9,
        "latency_p99_s", s.latency_p99_ns / 1e9, "memory_bytes",
        (long long)s.memory_bytes, "memory_peak", (long long)s.memory_peak,
        "offline_ahead", (long long)s.offline_ahead, "offline_split",
        (long long)s.offline_split, "offline_helped",
        (long long)s.offline_helped, "skipped", (long long)s.skipped);
}

static PyObject *vl_skipped(vloader_obj *self, PyObject *unused)
{
    (void)unused;
    if (vl_ready(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const char *m;
    for (int64_t i = 0; out && (m = sl_vloader_skipped_message(self->l, i));
         i++) {
        PyObject *u = PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "replace");
        if (!u || PyList_Append(out, u)) {
            Py_XDECREF(u);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(u);
    }
    return out;
}

static PyObject *vl_reset(vloader_obj *self, PyObject *unused)
{
    (void)unused;
    if (vl_ready(self))
        return NULL;
    sl_vloader_stats_reset(self->l);
    Py_RETURN_NONE;
}

static PyObject *vl_close(vloader_obj *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "VolumeLoader: close() during next()");
        return NULL;
    }
    if (self->l) {
        sl_vloader_t *l = self->l;
        self->l = NULL;
        Py_BEGIN_ALLOW_THREADS;
        sl_vloader_destroy(l);
        Py_END_ALLOW_THREADS;
    }
    Py_RETURN_NONE;
}

static PyObject *vl_get_nb(vloader_obj *self, void *closure)
{
    (void)closure;
    if (vl_ready(self))
        return NULL;
    return PyLong_FromLongLong(sl_vloader_batches_per_epoch(self->l));
}

static PyObject *vl_get_position(vloader_obj *self, void *closure)
{
    (void)closure;
    if (vl_ready(self))
        return NULL;
    return PyLong_FromLongLong(sl_vloader_position(self->l));
}

static PyObject *vl_get_cases(vloader_obj *self, void *closure)
{
    (void)closure;
    if (vl_ready(self))
        return NULL;
    return PyLong_FromLongLong(sl_vloader_cases(self->l));
}

static PyMethodDef vl_methods[] = {
    {"next", (PyCFunction)vl_next, METH_NOARGS,
     "next() -> {'epoch', 'index', 'image' (n,1,z,y,x) float32 (or "
     "bfloat16 bits as uint16), 'label' (n,1,z,y,x) uint8, 'cases', "
     "'dtype'}: the next batch of the stream."},
    {"stats", (PyCFunction)vl_stats, METH_NOARGS,
     "stats() -> counters: batches, samples, offline_runs, cache_hits, "
     "wait_s, predicted_s, actual_s, latency_p50_s, latency_p99_s, "
     "memory_bytes, memory_peak, offline_ahead, offline_split, "
     "offline_helped, skipped (cases left out, on_error='skip')."},
    {"skipped", (PyCFunction)vl_skipped, METH_NOARGS,
     "skipped() -> the messages of the cases skipped so far "
     "(on_error='skip'): 'create: FILE: cause' or 'epoch E: case NAME: "
     "cause' (the first 10000)."},
    {"reset_stats", (PyCFunction)vl_reset, METH_NOARGS,
     "Zeroes the counters and the latency window."},
    {"close", (PyCFunction)vl_close, METH_NOARGS, "Stops the threads."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef vl_getset[] = {
    {"batches_per_epoch", (getter)vl_get_nb, NULL, "ceil(cases / batch)", NULL},
    {"position", (getter)vl_get_position, NULL,
     "the stream position of the next batch: epoch x batches_per_epoch + "
     "index (batches passed over after an error are behind it)",
     NULL},
    {"cases", (getter)vl_get_cases, NULL,
     "cases used (those left out at create, on_error='skip', not counted)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject vloader_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.VolumeLoader",
    .tp_basicsize = sizeof(vloader_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "VolumeLoader(dataset, batch_size=2, patch=(128,128,128), "
              "seed=0, threads=0, prefetch=0, balance=True, cache_bytes=None, "
              "target_spacing=(1.6,1.2,1.2), oversampling=0.4, "
              "flip_prob=1/3, brightness_prob=0.1, noise_prob=0.1, "
              "memory_bytes=0, bfloat16=False, on_error='fail', "
              "unlabeled=False, start=0): 3-D U-Net training patches "
              "(sluice/vloader.h); batch_size >= 1; cache_bytes: None "
              "2 GiB, 0 no cache (no case kept once its patches are "
              "made); start: the stream position of the first batch (a "
              "resume).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)vl_init,
    .tp_dealloc = (destructor)vl_dealloc,
    .tp_methods = vl_methods,
    .tp_getset = vl_getset,
};

int slpy_vloader_init(PyObject *m)
{
    if (PyType_Ready(&vloader_type) < 0)
        return -1;
    Py_INCREF(&vloader_type);
    if (PyModule_AddObject(m, "VolumeLoader", (PyObject *)&vloader_type)) {
        Py_DECREF(&vloader_type);
        return -1;
    }
    return 0;
}
