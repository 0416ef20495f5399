/*
 * The objects that keep an engine and its handed-out batches alive, shared
 * by sluice.Loader (sluice_loader.c) and sluice.TextLoader (sluice_text.c).
 *
 *   Core   owns the engine; destroyed (kind->destroy, GIL released) when
 *          its last reference goes.
 *   Batch  owns one handed-out batch; it is the numpy base of the batch's
 *          arrays and holds the Core. When the last array goes, it gives
 *          the buffer back (kind->release: a short lock, no wait).
 *
 * Each loader has its own slpy_kind_t, so the two keep their own Python
 * type names (tests look at type(array.base).__name__).
 */
#include "sluice_py.h"

#include <stdint.h>
#include <string.h>

static void core_dealloc(slpy_core_t *c)
{
    void *engine = c->engine;
    if (engine) {
        void (*destroy)(void *) = c->kind->destroy;
        Py_BEGIN_ALLOW_THREADS;
        destroy(engine);
        Py_END_ALLOW_THREADS;
    }
    PyObject_Free(c);
}

static void batch_dealloc(slpy_batch_t *o)
{
    slpy_core_t *c = o->core;
    if (o->stream && c->kind->release_on) {
        c->kind->release_on(c->engine, o->b, o->stream);
        c->held--;
    } else {
        slpy_core_release(c, o->b);
    }
    Py_DECREF(c);
    PyObject_Free(o);
}

static PyObject *batch_get_stream(slpy_batch_t *o, void *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(o->stream);
}

static int batch_set_stream(slpy_batch_t *o, PyObject *v, void *unused)
{
    (void)unused;
    if (!v || !PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError,
                        "stream must be an int (a cudaStream_t handle, as "
                        "torch.cuda.Stream.cuda_stream)");
        return -1;
    }
    void *s = PyLong_AsVoidPtr(v);
    if (!s && PyErr_Occurred())
        return -1;
    o->stream = s;
    return 0;
}

static PyGetSetDef batch_getset[] = {
    {"stream", (getter)batch_get_stream, (setter)batch_set_stream,
     "The CUDA stream (a cudaStream_t handle as an int; 0: the legacy default "
     "stream) the batch's device memory is read on: when the batch goes, its "
     "buffer is written again only after the work queued there so far.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int slpy_kind_ready(slpy_kind_t *k)
{
    k->core_type = (PyTypeObject){
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = k->core_name,
        .tp_basicsize = sizeof(slpy_core_t),
        .tp_dealloc = (destructor)core_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = k->core_doc,
    };
    k->batch_type = (PyTypeObject){
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = k->batch_name,
        .tp_basicsize = sizeof(slpy_batch_t),
        .tp_dealloc = (destructor)batch_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = k->batch_doc,
        .tp_getset = batch_getset,
    };
    return PyType_Ready(&k->core_type) || PyType_Ready(&k->batch_type) ? -1 : 0;
}

slpy_core_t *slpy_core_new(slpy_kind_t *k, void *engine)
{
    slpy_core_t *c = PyObject_New(slpy_core_t, &k->core_type);
    if (!c) {
        Py_BEGIN_ALLOW_THREADS;
        k->destroy(engine);
        Py_END_ALLOW_THREADS;
        return NULL;
    }
    c->engine = engine;
    c->kind = k;
    c->held = 0;
    return c;
}

void slpy_core_release(slpy_core_t *c, const void *b)
{
    c->kind->release(c->engine, b);
    c->held--;
}

slpy_batch_t *slpy_batch_new(slpy_core_t *c, const void *b)
{
    slpy_batch_t *o = PyObject_New(slpy_batch_t, &c->kind->batch_type);
    if (!o) {
        slpy_core_release(c, b);
        return NULL;
    }
    Py_INCREF(c);
    o->core = c;
    o->b = b;
    o->stream = NULL;
    return o;
}

PyObject *slpy_batch_view(slpy_batch_t *owner, int type, int nd, npy_intp *dims,
                          void *data)
{
    PyObject *a =
        PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(type), nd,
                             dims, NULL, data, NPY_ARRAY_CARRAY, NULL);
    if (!a)
        return NULL;
    Py_INCREF(owner);
    if (PyArray_SetBaseObject((PyArrayObject *)a, (PyObject *)owner)) {
        Py_DECREF(a); /* SetBaseObject stole the owner reference */
        return NULL;
    }
    return a;
}

PyObject *slpy_batch_cuda(slpy_batch_t *owner, const char *typestr, int nd,
                          npy_intp *dims, void *data, int device)
{
    static PyObject *ns_type; /* types.SimpleNamespace, found once */
    if (!ns_type) {
        PyObject *types = PyImport_ImportModule("types");
        ns_type =
            types ? PyObject_GetAttrString(types, "SimpleNamespace") : NULL;
        Py_XDECREF(types);
        if (!ns_type)
            return NULL;
    }
    PyObject *shape = PyTuple_New(nd);
    for (int i = 0; shape && i < nd; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong((long long)dims[i]));
    PyObject *iface =
        shape
            ? Py_BuildValue("{s:O,s:s,s:(K,O),s:O,s:i,s:O}", "shape", shape,
                            "typestr", typestr, "data",
                            (unsigned long long)(uintptr_t)data, Py_False,
                            "strides", Py_None, "version", 3, "stream", Py_None)
            : NULL;
    Py_XDECREF(shape);
    PyObject *kw =
        iface
            ? Py_BuildValue("{s:O,s:O,s:i}", "__cuda_array_interface__", iface,
                            "_batch", (PyObject *)owner, "device", device)
            : NULL;
    Py_XDECREF(iface);
    PyObject *args = kw ? PyTuple_New(0) : NULL;
    PyObject *o = args ? PyObject_Call(ns_type, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return o;
}

PyObject *slpy_closed_mid_iteration(const char *what)
{
    return PyErr_Format(PyExc_ValueError,
                        "%s was closed during an iteration: no more batches "
                        "(the epoch did not end)",
                        what);
}

int slpy_closed(const slpy_core_t *c, const char *what)
{
    if (c)
        return 0;
    PyErr_Format(PyExc_ValueError, "operation on a closed %s", what);
    return 1;
}

PyObject *slpy_skipped_list(const slpy_core_t *c)
{
    PyObject *list = PyList_New(0);
    const char *s;
    for (int64_t i = 0; list && (s = c->kind->skipped(c->engine, i)); i++) {
        PyObject *m = c->kind->skipped_utf8
                          ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s),
                                                 "backslashreplace")
                          : PyUnicode_DecodeFSDefault(s);
        if (!m || PyList_Append(list, m))
            Py_CLEAR(list);
        Py_XDECREF(m);
    }
    return list;
}

int slpy_parse_int(PyObject *o, const char *name, long min, long max, int *out)
{
    if (o == Py_None)
        return 0;
    if (!PyIndex_Check(o)) { /* ints, numpy's included; not floats */
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %R", name, o);
        return -1;
    }
    int over = 0;
    long v = PyLong_AsLongAndOverflow(o, &over);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (over || v < min || v > max) { /* beyond a C long: out of range too */
        PyErr_Format(PyExc_ValueError, "%s must be in %ld..%ld, not %R", name,
                     min, max, o);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int slpy_parse_seed(PyObject *o, unsigned long long *out)
{
    if (o == Py_None)
        return 0;
    if (!PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "seed must be an int, not %R", o);
        return -1;
    }
    PyObject *v = PyNumber_Index(o);
    if (!v)
        return -1;
    int over = 0;
    long long s = PyLong_AsLongLongAndOverflow(v, &over);
    unsigned long long u = (unsigned long long)s;
    if (over > 0) /* past 2**63 - 1: as unsigned, up to 2**64 - 1 */
        u = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        over = -1;
    }
    if (over < 0) {
        PyErr_Format(PyExc_ValueError,
                     "seed must be in -2**63..2**64-1, not %R", o);
        return -1;
    }
    *out = u;
    return 0;
}

PyObject *slpy_return_self(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

/* A byte count: an int of at least min (`why` says what the least
 * means, in the error); None leaves *out. */
int slpy_parse_bytes(PyObject *v, const char *name, long long min,
                     const char *why, int64_t *out)
{
    if (v == Py_None)
        return 0;
    long long n = PyLong_AsLongLong(v);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < min) {
        PyErr_Format(PyExc_ValueError, "%s must be >= %lld%s, not %lld", name,
                     min, why, n);
        return -1;
    }
    *out = n;
    return 0;
}
