/*
 * sluice._sluice module: errors, argument helpers shared with the loader,
 * image_info (a header's size), image_transform (one sample, as the loader
 * transforms it), _analyze / _calibrate (the JSON of sl_analyze and
 * sl_calibrate, parsed by sluice.analyze / sluice.calibrate) and version.
 */
#define SLUICE_PY_IMPORT_ARRAY
#include "sluice_py.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sluice/analysis.h"

PyObject *slpy_error;
PyObject *slpy_not_found;

PyObject *slpy_raise(int code, const char *msg, int args_error)
{
    if (!msg || !*msg)
        msg = sl_strerror(code);
    if (code == SL_ENOMEM)
        return PyErr_Format(PyExc_MemoryError, "%s", msg);
    if (args_error && (code == SL_EINVAL || code == SL_ERANGE))
        return PyErr_Format(PyExc_ValueError, "%s", msg);
    PyObject *type = code == SL_ENOTFOUND ? slpy_not_found : slpy_error;
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc)
        return NULL;
    PyObject *num = PyLong_FromLong(code);
    PyObject *name = PyUnicode_FromString(sl_strerror(code));
    /* NotFoundError is an OSError too: errno as open() would set it (its
     * one argument keeps str() the engine's message, no "[Errno 2]"). */
    PyObject *eno = type == slpy_not_found ? PyLong_FromLong(ENOENT) : NULL;
    if (num && name && (type != slpy_not_found || eno) &&
        !PyObject_SetAttrString(exc, "code", num) &&
        !PyObject_SetAttrString(exc, "reason", name) &&
        (!eno || !PyObject_SetAttrString(exc, "errno", eno)))
        PyErr_SetObject(type, exc);
    Py_XDECREF(eno);
    Py_XDECREF(num);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

int slpy_parse_dtype(PyObject *o, int *dtype)
{
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s)
            return -1;
        if (!strcmp(s, "uint8")) {
            *dtype = SL_DTYPE_UINT8;
            return 0;
        }
        if (!strcmp(s, "float32") || !strcmp(s, "float")) {
            *dtype = SL_DTYPE_FLOAT32;
            return 0;
        }
    } else {
        /* numpy.uint8, numpy.dtype('float32'), ... */
        PyArray_Descr *d = NULL;
        if (PyArray_DescrConverter2(o, &d) && d) {
            int t = d->type_num;
            Py_DECREF(d);
            if (t == NPY_UINT8 || t == NPY_FLOAT32) {
                *dtype = t == NPY_UINT8 ? SL_DTYPE_UINT8 : SL_DTYPE_FLOAT32;
                return 0;
            }
        }
        PyErr_Clear();
    }
    PyErr_Format(PyExc_ValueError, "dtype must be 'uint8' or 'float32', not %R",
                 o);
    return -1;
}

int slpy_parse_layout(PyObject *o, int *layout)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && !strcmp(s, "chw")) {
        *layout = SL_LAYOUT_CHW;
        return 0;
    }
    if (s && !strcmp(s, "hwc")) {
        *layout = SL_LAYOUT_HWC;
        return 0;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "layout must be 'chw' or 'hwc', not %R", o);
    return -1;
}

int slpy_parse_float3(PyObject *o, const char *what, float f[3])
{
    if (o == NULL || o == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq || PySequence_Fast_GET_SIZE(seq) != 3) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of 3 numbers",
                     what);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        f[i] = (float)v;
    }
    Py_DECREF(seq);
    return 0;
}

/* Two ints from a 2- or 4-tuple argument. */
static int parse_ints(PyObject *o, const char *what, int n, int *v)
{
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq || PySequence_Fast_GET_SIZE(seq) != n) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %d ints", what,
                     n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (x < 0 || x > 1 << 20) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "%s: %ld is out of range", what, x);
            return -1;
        }
        v[i] = (int)x;
    }
    Py_DECREF(seq);
    return 0;
}

PyDoc_STRVAR(image_transform_doc,
             "image_transform(data, crop=None, size=None, flip=False, "
             "dtype='uint8', layout='chw', mean=None, std=None, "
             "dct_scale=True, strict=False)\n--\n\n"
             "Decodes one JPEG/PNG (any bytes-like object), crops the box "
             "crop=(x, y, w, h)\n(None: the whole image), resizes it to "
             "size=(w, h) (None: the box's size),\nflips, converts, and "
             "returns a new numpy array (3xHxW or HxWx3).");

static PyObject *image_transform(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data",      "crop",   "size", "flip",
                             "dtype",     "layout", "mean", "std",
                             "dct_scale", "strict", NULL};
    Py_buffer buf;
    PyObject *crop = Py_None, *size = Py_None, *dt = NULL, *lay = NULL;
    PyObject *mean = Py_None, *std = Py_None;
    int flip = 0, dct = 1, strict = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|OOpOOOOpp", kwlist, &buf,
                                     &crop, &size, &flip, &dt, &lay, &mean,
                                     &std, &dct, &strict))
        return NULL;
    sl_transform_t t;
    sl_transform_init(&t);
    PyObject *arr = NULL;
    int box[4] = {0, 0, 0, 0}, wh[2] = {0, 0}, iw, ih;
    if ((dt && slpy_parse_dtype(dt, &t.dtype)) ||
        (lay && slpy_parse_layout(lay, &t.layout)) ||
        (crop != Py_None && parse_ints(crop, "crop", 4, box)) ||
        (size != Py_None && parse_ints(size, "size", 2, wh)) ||
        slpy_parse_float3(mean, "mean", t.mean) ||
        slpy_parse_float3(std, "std", t.std))
        goto out;
    int rc = sl_image_info(buf.buf, (size_t)buf.len, &iw, &ih);
    if (rc) {
        slpy_raise(rc, "not a JPEG or PNG image, or a damaged header", 0);
        goto out;
    }
    t.crop_x = box[0], t.crop_y = box[1], t.crop_w = box[2], t.crop_h = box[3];
    if (!t.crop_w || !t.crop_h)
        t.crop_x = t.crop_y = 0, t.crop_w = iw, t.crop_h = ih;
    t.out_w = wh[0] ? wh[0] : t.crop_w;
    t.out_h = wh[1] ? wh[1] : t.crop_h;
    t.flip = flip;
    t.no_dct_scale = !dct;
    t.strict = strict;
    npy_intp dims[3] = {3, t.out_h, t.out_w};
    if (t.layout == SL_LAYOUT_HWC)
        dims[0] = t.out_h, dims[1] = t.out_w, dims[2] = 3;
    arr = PyArray_SimpleNew(
        3, dims, t.dtype == SL_DTYPE_UINT8 ? NPY_UINT8 : NPY_FLOAT32);
    if (!arr)
        goto out;
    char err[512] = "";
    Py_BEGIN_ALLOW_THREADS;
    rc =
        sl_image_transform(buf.buf, (size_t)buf.len, &t,
                           PyArray_DATA((PyArrayObject *)arr), err, sizeof err);
    Py_END_ALLOW_THREADS;
    if (rc) {
        Py_CLEAR(arr);
        slpy_raise(rc, err, 0);
    }
out:
    PyBuffer_Release(&buf);
    return arr;
}

PyDoc_STRVAR(image_info_doc,
             "image_info(data)\n--\n\n"
             "(width, height) of a JPEG or PNG from its header alone "
             "(sluice.Error if\nthe bytes are neither or the header is "
             "damaged).");

static PyObject *image_info(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE))
        return NULL;
    int w = 0, h = 0;
    int rc = sl_image_info(buf.buf, (size_t)buf.len, &w, &h);
    PyBuffer_Release(&buf);
    if (rc)
        return slpy_raise(rc, "not a JPEG or PNG image, or a damaged header",
                          0);
    return Py_BuildValue("(ii)", w, h);
}

/* Private: the PPO loss and gradient of src/sched/ppo.c for
 * tests/python/test_rl_autograd.py. The engine's internal symbol is not
 * exported from libsluice.so; the extension links the static library, so
 * it is declared here (src/sched/ppo.h has the contract). */
double sl__ppo_test_loss(const double *params, size_t n_params, int n_in,
                         int n_hid, int n_knobs, const double *obs,
                         const uint8_t *act, const uint8_t *mask,
                         const double *logp_old, const double *adv,
                         const double *ret, int n, const double *hp3,
                         double *grad);

static PyObject *ppo_test_loss(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b[7];
    int n_in, n_hid;
    double hp3[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*iiy*y*y*y*y*y*(ddd)", &b[0], &n_in, &n_hid,
                          &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &hp3[0],
                          &hp3[1], &hp3[2]))
        return NULL;
    /* params, obs (n x n_in), act (n x knobs), mask (n x 3 knobs),
     * logp_old, adv, ret (n each): sizes checked against n = len(adv);
     * knobs = len(act) / n. */
    size_t n = (size_t)b[5].len / sizeof(double);
    size_t np_ = (size_t)b[0].len / sizeof(double);
    size_t nk = n ? (size_t)b[2].len / n : 0;
    PyObject *out = NULL;
    if (n_in < 1 || n < 1 || n > INT32_MAX || nk < 1 || nk > 4 ||
        (size_t)b[1].len != n * (size_t)n_in * sizeof(double) ||
        (size_t)b[2].len != n * nk || (size_t)b[3].len != n * nk * 3 ||
        (size_t)b[4].len != n * sizeof(double) ||
        (size_t)b[6].len != n * sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "_ppo_test_loss: bad sizes");
        goto done;
    }
    /* Each action one of 3 and allowed by its mask (else the loss reads
     * past its logits, or takes the log of 0). */
    const uint8_t *act = b[2].buf, *mask = b[3].buf;
    for (size_t i = 0; i < n * nk; i++)
        if (act[i] > 2 || !mask[i * 3 + act[i]]) {
            PyErr_SetString(PyExc_ValueError,
                            "_ppo_test_loss: an action out of 0..2 or masked");
            goto done;
        }
    npy_intp dim = (npy_intp)np_;
    PyObject *grad = PyArray_ZEROS(1, &dim, NPY_FLOAT64, 0);
    if (!grad)
        goto done;
    double loss =
        sl__ppo_test_loss(b[0].buf, np_, n_in, n_hid, (int)nk, b[1].buf,
                          b[2].buf, b[3].buf, b[4].buf, b[5].buf, b[6].buf,
                          (int)n, hp3, PyArray_DATA((PyArrayObject *)grad));
    out = Py_BuildValue("(dN)", loss, grad);
done:
    for (int i = 0; i < 7; i++)
        PyBuffer_Release(&b[i]);
    return out;
}

/* Private: the simulator's copy of sluice.ray's window rule
 * (src/sim/remote.h) for tests/python/test_sim_budget.py, which checks it
 * against ray.py's _window, the reference. Declared here as
 * sl__ppo_test_loss is: internal, linked from the static library. */
int64_t sl__sim_remote_window(int64_t count, int64_t budget,
                              int64_t batch_bytes, int64_t live, int64_t chunk);

static PyObject *sim_remote_window(PyObject *self, PyObject *args)
{
    (void)self;
    long long count, budget, batch_bytes, live, chunk;
    if (!PyArg_ParseTuple(args, "LLLLL", &count, &budget, &batch_bytes, &live,
                          &chunk))
        return NULL;
    return PyLong_FromLongLong(
        sl__sim_remote_window(count, budget, batch_bytes, live, chunk));
}

/* The JSON text a tool returned, as a str; frees it. */
static PyObject *tool_result(int rc, char *json, const char *err)
{
    if (rc)
        return slpy_raise(rc, err, 1);
    PyObject *s = PyUnicode_FromString(json);
    sl_analysis_free(json);
    return s;
}

static void progress_to_stderr(void *user, const char *line)
{
    fprintf(stderr, "%s: %s\n", (const char *)user, line);
}

PyDoc_STRVAR(analyze_doc,
             "_analyze(source, step_ms=0, rate=0, sweep=False, batch_size=0, "
             "image_size=0, dtype='uint8', threads=0, prefetch=0, seconds=0, "
             "verbose=False)\n--\n\n"
             "The JSON text of sl_analyze (0: the default); see "
             "sluice.analyze.");

static PyObject *analyze(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"source",     "step_ms",    "rate",    "sweep",
                             "batch_size", "image_size", "dtype",   "threads",
                             "prefetch",   "seconds",    "verbose", NULL};
    PyObject *source = NULL, *dtype = NULL;
    sl_analyze_options_t o;
    sl_analyze_options_init(&o);
    int verbose = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O&|$ddpiiOiidp:_analyze", kwlist, PyUnicode_FSConverter,
            &source, &o.step_ms, &o.rate, &o.sweep, &o.batch_size,
            &o.image_size, &dtype, &o.decode_threads, &o.prefetch, &o.seconds,
            &verbose))
        return NULL;
    if (dtype && slpy_parse_dtype(dtype, &o.dtype)) {
        Py_DECREF(source);
        return NULL;
    }
    if (verbose) {
        o.progress = progress_to_stderr;
        o.progress_user = (void *)"sluice.analyze";
    }
    char err[1024] = "", *json = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_analyze(PyBytes_AS_STRING(source), &o, &json, err, sizeof err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(source);
    return tool_result(rc, json, err);
}

PyDoc_STRVAR(calibrate_doc,
             "_calibrate(telemetry_path, skip_s=0, step_ms=0, consumer_cpu=0, "
             "batch_bytes=0, storage_bw=0, storage_latency_ms=0)\n--\n\n"
             "The JSON text of sl_calibrate (0: the default, < 0: none); see "
             "sluice.calibrate.");

static PyObject *calibrate(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"telemetry_path",     "skip_s",      "step_ms",
                             "consumer_cpu",       "batch_bytes", "storage_bw",
                             "storage_latency_ms", NULL};
    PyObject *path = NULL;
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O&|$dddddd:_calibrate", kwlist, PyUnicode_FSConverter,
            &path, &o.skip_s, &o.step_ms, &o.consumer_cpu, &o.batch_bytes,
            &o.storage_bw, &o.storage_latency_ms))
        return NULL;
    char err[1024] = "", *json = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_calibrate(PyBytes_AS_STRING(path), &o, &json, err, sizeof err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    return tool_result(rc, json, err);
}

static PyMethodDef methods[] = {
    {"image_info", image_info, METH_O, image_info_doc},
    {"image_transform", (PyCFunction)(void (*)(void))image_transform,
     METH_VARARGS | METH_KEYWORDS, image_transform_doc},
    {"_ppo_test_loss", ppo_test_loss, METH_VARARGS,
     "Private (tests): the rl policy's PPO loss and gradient."},
    {"_sim_remote_window", sim_remote_window, METH_VARARGS,
     "Private (tests): the simulator's window rule (sluice.ray._window's "
     "copy)."},
    {"_analyze", (PyCFunction)(void (*)(void))analyze,
     METH_VARARGS | METH_KEYWORDS, analyze_doc},
    {"_calibrate", (PyCFunction)(void (*)(void))calibrate,
     METH_VARARGS | METH_KEYWORDS, calibrate_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "sluice._sluice",
    "The C extension of sluice: see the sluice package.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__sluice(void)
{
    import_array();
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyObject *dict = Py_BuildValue("{s:i,s:s}", "code", 0, "reason", "");
    slpy_error = dict ? PyErr_NewExceptionWithDoc(
                            "sluice.Error",
                            "An engine failure: str() is the engine's "
                            "message (file, record, cause); .code is the "
                            "SL_E* number, .reason its name.",
                            PyExc_RuntimeError, dict)
                      : NULL;
    Py_XDECREF(dict);
    PyObject *bases = slpy_error
                          ? PyTuple_Pack(2, slpy_error, PyExc_FileNotFoundError)
                          : NULL;
    slpy_not_found =
        bases ? PyErr_NewExceptionWithDoc(
                    "sluice.NotFoundError",
                    "The engine's SL_ENOTFOUND (a path that is not there, "
                    "or nothing to read in it): a sluice.Error and a "
                    "FileNotFoundError (errno ENOENT), as torchvision's "
                    "ImageFolder raises for a missing folder.",
                    bases, NULL)
              : NULL;
    Py_XDECREF(bases);
    Py_XINCREF(slpy_error); /* PyModule_AddObject steals one on success */
    Py_XINCREF(slpy_not_found);
    if (!slpy_error || !slpy_not_found ||
        PyModule_AddObject(m, "Error", slpy_error) ||
        PyModule_AddObject(m, "NotFoundError", slpy_not_found) ||
        PyModule_AddStringConstant(m, "version", sl_version_string()) ||
        slpy_loader_init(m) || slpy_text_init(m) || slpy_volume_init(m) ||
        slpy_vloader_init(m)) {
        Py_DECREF(m);
        return NULL;
    }
#define ADD_CODE(name, num, msg)                                               \
    if (PyModule_AddIntConstant(m, "E" #name, num)) {                          \
        Py_DECREF(m);                                                          \
        return NULL;                                                           \
    }
    SL_ERRNO_MAP(ADD_CODE)
#undef ADD_CODE
    return m;
}
