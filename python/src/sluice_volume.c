/*
 * sluice._sluice: volumes (sluice/volume.h). load_volume returns the
 * library's data as a numpy array without a copy (Fortran order, nibabel's
 * shape), owned by a capsule that frees the volume; volume_info the
 * header's facts; volume_dataset the cases of a dataset.
 */
#include "sluice_py.h"

#include <sluice/volume.h>

static int npy_type(int dtype)
{
    switch (dtype) {
    case SL_VOLUME_UINT8:
        return NPY_UINT8;
    case SL_VOLUME_INT16:
        return NPY_INT16;
    case SL_VOLUME_INT32:
        return NPY_INT32;
    case SL_VOLUME_FLOAT32:
        return NPY_FLOAT32;
    case SL_VOLUME_INT8:
        return NPY_INT8;
    case SL_VOLUME_UINT16:
        return NPY_UINT16;
    case SL_VOLUME_UINT32:
        return NPY_UINT32;
    default:
        return NPY_FLOAT64;
    }
}

/* A new reference to None (Py_NewRef is 3.10+; the package supports 3.9). */
static PyObject *none_ref(void)
{
    Py_INCREF(Py_None);
    return Py_None;
}

static void free_capsule(PyObject *cap)
{
    sl_volume_free(PyCapsule_GetPointer(cap, "sluice.volume"));
}

/* Loads path with o; NULL with an exception on failure. */
static sl_volume_t *load(PyObject *path, sl_volume_options_t *o)
{
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(path, &b))
        return NULL;
    sl_volume_t *v = NULL;
    char err[1024] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_volume_load(PyBytes_AS_STRING(b), o, &v, err, sizeof err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(b);
    if (rc) {
        slpy_raise(rc, err, 0);
        return NULL;
    }
    return v;
}

static int parse_orient(const char *s, int *orient)
{
    if (!s || !strcmp(s, "stored") || !strcmp(s, "as_stored")) {
        *orient = SL_VOLUME_AS_STORED;
        return 0;
    }
    if (!strcmp(s, "ras") || !strcmp(s, "RAS")) {
        *orient = SL_VOLUME_RAS;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "orient must be 'stored' or 'ras', not '%s'",
                 s);
    return -1;
}

static PyObject *as_arrays(sl_volume_t *v);

static PyObject *affine_array(const sl_volume_t *v)
{
    npy_intp d[2] = {4, 4};
    PyObject *a = PyArray_SimpleNew(2, d, NPY_FLOAT64);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), v->affine, sizeof v->affine);
    return a;
}

PyDoc_STRVAR(load_volume_doc,
             "load_volume(path, orient='stored', native=False, "
             "max_bytes=None)\n--\n\n"
             "A NIfTI-1/-2 volume (.nii, .nii.gz) as (data, affine): data a "
             "numpy array of\nnibabel's shape (x, y, z[, t]), Fortran order, "
             "float32 with scl_slope /\nscl_inter applied (native=True: the "
             "file's type, unscaled); affine the\n4x4 float64 voxel-to-world "
             "matrix nibabel's img.affine gives. orient='ras':\nreoriented "
             "as nibabel's as_closest_canonical. sluice.Error names the "
             "file\nand the cause.");

static PyObject *load_volume(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "orient", "native", "max_bytes", NULL};
    PyObject *path;
    const char *orient = NULL;
    int native = 0;
    long long max_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|zpL", kwlist, &path, &orient,
                                     &native, &max_bytes))
        return NULL;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    if (parse_orient(orient, &o.orient))
        return NULL;
    if (max_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be >= 0");
        return NULL;
    }
    o.native = native;
    o.max_bytes = max_bytes;
    sl_volume_t *v = load(path, &o);
    return v ? as_arrays(v) : NULL;
}

PyDoc_STRVAR(volume_info_doc,
             "volume_info(path, orient='stored')\n--\n\n"
             "A NIfTI volume's header facts, without its data, as a dict: "
             "shape, spacing,\naffine (4x4 list), dtype (stored), "
             "nifti_version, scl_slope, scl_inter,\nqform_code, sform_code, "
             "affine_source, axcodes, vox_offset, big_endian,\ndescrip.");

static PyObject *volume_info(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "orient", NULL};
    PyObject *path;
    const char *orient = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|z", kwlist, &path, &orient))
        return NULL;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.header_only = 1;
    if (parse_orient(orient, &o.orient))
        return NULL;
    sl_volume_t *v = load(path, &o);
    if (!v)
        return NULL;
    static const char *const src[] = {"", "sform", "qform", "pixdim"};
    PyObject *shape = PyTuple_New(v->ndim), *sp = PyTuple_New(v->ndim);
    PyObject *aff = PyList_New(4);
    for (int i = 0; shape && sp && i < v->ndim; i++) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(v->dim[i]));
        PyTuple_SET_ITEM(sp, i, PyFloat_FromDouble(v->spacing[i]));
    }
    for (int i = 0; aff && i < 4; i++)
        PyList_SET_ITEM(aff, i,
                        Py_BuildValue("[dddd]", v->affine[i][0],
                                      v->affine[i][1], v->affine[i][2],
                                      v->affine[i][3]));
    PyObject *d = NULL;
    if (shape && sp && aff && !PyErr_Occurred())
        d = Py_BuildValue(
            "{s:O,s:O,s:O,s:s,s:i,s:i,s:d,s:d,s:i,s:i,s:s,s:s,s:L,s:O,s:s}",
            "shape", shape, "spacing", sp, "affine", aff, "dtype",
            sl_volume_dtype_name(v->stored_dtype), "nifti_datatype",
            v->nifti_datatype, "nifti_version", v->nifti_version, "scl_slope",
            v->scl_slope, "scl_inter", v->scl_inter, "qform_code",
            v->qform_code, "sform_code", v->sform_code, "affine_source",
            src[v->affine_source & 3], "axcodes", v->axcodes, "vox_offset",
            (long long)v->vox_offset, "big_endian",
            v->big_endian ? Py_True : Py_False, "descrip", v->descrip);
    Py_XDECREF(shape);
    Py_XDECREF(sp);
    Py_XDECREF(aff);
    sl_volume_free(v);
    return d;
}

PyDoc_STRVAR(volume_dataset_doc,
             "volume_dataset(path, unlabeled=False)\n--\n\n"
             "The cases of a volume dataset (a KiTS19-layout folder, "
             "CASE/imaging.nii.gz +\nCASE/segmentation.nii.gz, or a list file "
             "of 'IMAGE [LABEL]' lines) as a\nlist of (name, image_path, "
             "label_path or None).");

static PyObject *volume_dataset(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "unlabeled", NULL};
    PyObject *path, *b = NULL;
    int unlabeled = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwlist, &path,
                                     &unlabeled) ||
        !PyUnicode_FSConverter(path, &b))
        return NULL;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = unlabeled;
    sl_volume_dataset_t *ds = NULL;
    char err[1024] = "";
    int rc =
        sl_volume_dataset_open(PyBytes_AS_STRING(b), &o, &ds, err, sizeof err);
    Py_DECREF(b);
    if (rc)
        return slpy_raise(rc, err, 0);
    int64_t n = sl_volume_dataset_count(ds);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        const char *lab = sl_volume_dataset_label(ds, i);
        PyObject *t = Py_BuildValue(
            "(NNN)", PyUnicode_DecodeFSDefault(sl_volume_dataset_name(ds, i)),
            PyUnicode_DecodeFSDefault(sl_volume_dataset_image(ds, i)),
            lab ? PyUnicode_DecodeFSDefault(lab) : none_ref());
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    sl_volume_dataset_destroy(ds);
    return list;
}

/* ---- datasets as a handle: sluice.VolumeDataset (sluice/__init__.py) */

static void free_dataset(PyObject *cap)
{
    sl_volume_dataset_destroy(PyCapsule_GetPointer(cap, "sluice.dataset"));
}

static PyObject *dataset_open(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path, *b = NULL;
    int unlabeled = 0;
    if (!PyArg_ParseTuple(args, "Op", &path, &unlabeled) ||
        !PyUnicode_FSConverter(path, &b))
        return NULL;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = unlabeled;
    sl_volume_dataset_t *ds = NULL;
    char err[1024] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_volume_dataset_open(PyBytes_AS_STRING(b), &o, &ds, err, sizeof err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(b);
    if (rc)
        return slpy_raise(rc, err, 0);
    PyObject *cap = PyCapsule_New(ds, "sluice.dataset", free_dataset);
    if (!cap)
        sl_volume_dataset_destroy(ds);
    return cap;
}

/* The array of a loaded volume (owning it) and its affine. */
static PyObject *as_arrays(sl_volume_t *v)
{
    PyObject *cap = PyCapsule_New(v, "sluice.volume", free_capsule);
    if (!cap) {
        sl_volume_free(v);
        return NULL;
    }
    npy_intp dims[4];
    for (int i = 0; i < v->ndim; i++)
        dims[i] = (npy_intp)v->dim[i];
    PyObject *arr =
        PyArray_New(&PyArray_Type, v->ndim, dims, npy_type(v->dtype), NULL,
                    v->data, 0, NPY_ARRAY_FARRAY, NULL);
    if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, cap)) {
        Py_XDECREF(arr);
        if (!arr)
            Py_DECREF(cap);
        return NULL;
    }
    PyObject *aff = affine_array(v);
    if (!aff) {
        Py_DECREF(arr);
        return NULL;
    }
    return Py_BuildValue("(NN)", arr, aff);
}

static PyObject *dataset_load(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *cap;
    long long i, max_bytes;
    const char *orient;
    int native;
    if (!PyArg_ParseTuple(args, "OLzpL", &cap, &i, &orient, &native,
                          &max_bytes))
        return NULL;
    sl_volume_dataset_t *ds = PyCapsule_GetPointer(cap, "sluice.dataset");
    if (!ds)
        return NULL;
    if (i < 0 || i >= sl_volume_dataset_count(ds))
        return PyErr_Format(PyExc_IndexError, "case %lld of %lld", i,
                            (long long)sl_volume_dataset_count(ds));
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    if (parse_orient(orient, &o.orient))
        return NULL;
    o.native = native;
    o.max_bytes = max_bytes;
    sl_volume_t *img = NULL, *lab = NULL;
    char err[1024] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_volume_dataset_load(ds, i, &o, &img, &lab, err, sizeof err);
    Py_END_ALLOW_THREADS;
    if (rc)
        return slpy_raise(rc, err, 0);
    PyObject *a = as_arrays(img), *b = NULL;
    if (!a) {
        sl_volume_free(lab);
        return NULL;
    }
    if (lab && !(b = as_arrays(lab))) {
        Py_DECREF(a);
        return NULL;
    }
    if (!b)
        b = Py_BuildValue("(OO)", Py_None, Py_None);
    PyObject *r = b ? Py_BuildValue("(OO)", a, b) : NULL;
    Py_DECREF(a);
    Py_XDECREF(b);
    return r;
}

static PyObject *dataset_cases(PyObject *self, PyObject *arg)
{
    (void)self;
    sl_volume_dataset_t *ds = PyCapsule_GetPointer(arg, "sluice.dataset");
    if (!ds)
        return NULL;
    int64_t n = sl_volume_dataset_count(ds);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        const char *img = sl_volume_dataset_image(ds, i);
        const char *lab = sl_volume_dataset_label(ds, i);
        PyObject *t = Py_BuildValue(
            "(NNNO)", PyUnicode_DecodeFSDefault(sl_volume_dataset_name(ds, i)),
            img ? PyUnicode_DecodeFSDefault(img) : none_ref(),
            lab ? PyUnicode_DecodeFSDefault(lab) : none_ref(),
            sl_volume_dataset_has_label(ds, i) ? Py_True : Py_False);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyMethodDef volume_methods[] = {
    {"_volume_dataset_open", dataset_open, METH_VARARGS,
     "Private: a volume dataset handle (sluice.VolumeDataset)."},
    {"_volume_dataset_cases", dataset_cases, METH_O,
     "Private: [(name, image, label, has_label)] of a dataset handle."},
    {"_volume_dataset_load", dataset_load, METH_VARARGS,
     "Private: ((image, affine), (label, affine) or (None, None))."},
    {"load_volume", (PyCFunction)(void (*)(void))load_volume,
     METH_VARARGS | METH_KEYWORDS, load_volume_doc},
    {"volume_info", (PyCFunction)(void (*)(void))volume_info,
     METH_VARARGS | METH_KEYWORDS, volume_info_doc},
    {"volume_dataset", (PyCFunction)(void (*)(void))volume_dataset,
     METH_VARARGS | METH_KEYWORDS, volume_dataset_doc},
    {NULL, NULL, 0, NULL}};

int slpy_volume_init(PyObject *module)
{
    return PyModule_AddFunctions(module, volume_methods) ||
           PyModule_AddIntConstant(module, "HAVE_NIFTI", SL_HAVE_NIFTI);
}
