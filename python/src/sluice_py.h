/*
 * sluice._sluice: the CPython extension over libsluice (private header).
 *
 * sluice_module.c  module init, sluice.Error (and NotFoundError),
 *                  image_transform, version
 * sluice_core.c    the Core / Batch objects that keep an engine and its
 *                  handed-out batches alive, and argument helpers
 * sluice_loader.c  sluice.Loader (sluice_loader_new.c: its constructor;
 *                  sluice_loader.h: their object)
 * sluice_text.c    sluice.TextLoader
 * sluice_volume.c  load_volume, volume_info, volume_dataset (NIfTI)
 * sluice_vloader.c VolumeLoader (3-D U-Net patches)
 *
 * Both files use numpy's C API through one import table
 * (PY_ARRAY_UNIQUE_SYMBOL); only sluice_module.c imports it.
 */
#ifndef SLUICE_PY_H
#define SLUICE_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL sluice_ARRAY_API
#ifndef SLUICE_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <sluice/sluice.h>

/** sluice.Error (a RuntimeError with .code, the SL_E* number). */
extern PyObject *slpy_error;
/** sluice.NotFoundError: sluice.Error and FileNotFoundError (SL_ENOTFOUND). */
extern PyObject *slpy_not_found;

/** Raises the exception for an engine failure `code` with message `msg`
 *  (NULL or empty: sl_strerror(code)): ValueError for SL_EINVAL/SL_ERANGE
 *  when `args_error` is set (a bad argument), MemoryError for SL_ENOMEM,
 *  sluice.NotFoundError for SL_ENOTFOUND, sluice.Error otherwise.
 *  @return NULL, for `return slpy_raise(...)`. */
PyObject *slpy_raise(int code, const char *msg, int args_error);

/** Parses "uint8" / "float32" (or "float"), or anything numpy.dtype takes
 *  that is one of those, into *dtype (SL_DTYPE_*). @return 0, or -1 with
 *  an exception set. */
int slpy_parse_dtype(PyObject *o, int *dtype);
/** Parses "chw" / "hwc" into *layout. @return 0, or -1 with an exception. */
int slpy_parse_layout(PyObject *o, int *layout);
/** Parses a sequence of 3 numbers into f[3]; None leaves f as it is.
 *  @return 0, or -1 with an exception. */
int slpy_parse_float3(PyObject *o, const char *what, float f[3]);

/* ------------------------------------------- engine core (sluice_core.c) */

/** What a loader's engine is: its Python type names and the engine calls
 *  the shared Core / Batch objects make. One static instance per loader;
 *  slpy_kind_ready() fills the two types. */
typedef struct slpy_kind {
    const char *core_name, *core_doc;   /* e.g. "sluice._sluice._Core" */
    const char *batch_name, *batch_doc; /* e.g. "..._BatchBuffer" */
    void (*destroy)(void *engine);      /* called with the GIL released */
    void (*release)(void *engine, const void *batch); /* short, no wait */
    /* The same for a batch its consumer read on a CUDA stream (NULL: the
     * kind has no device batches; release is used) */
    void (*release_on)(void *engine, const void *batch, void *stream);
    const char *(*skipped)(const void *engine, int64_t i); /* NULL: past */
    int skipped_utf8; /* skipped messages: UTF-8 (else file-system names) */
    PyTypeObject core_type, batch_type;
} slpy_kind_t;

/** Owns an engine; the engine is destroyed when the last reference goes. */
typedef struct slpy_core {
    PyObject_HEAD void *engine;
    slpy_kind_t *kind;
    int held; /* batches out of the engine: Batch objects + any the loader
                 keeps itself (incremented by the loader on each next) */
} slpy_core_t;

/** Owns one handed-out batch and holds its Core; the numpy base of the
 *  batch's arrays. Its end gives the batch back (slpy_core_release). */
typedef struct slpy_batch {
    PyObject_HEAD slpy_core_t *core;
    const void *b;
    /* A device batch's consumer's CUDA stream (its `stream` attribute; 0:
     * the legacy default stream): the buffer is fenced there when given
     * back (kind->release_on). */
    void *stream;
} slpy_batch_t;

/* How long a loader's next() waits in the engine between checks for a
 * signal (Ctrl-C raises KeyboardInterrupt within it, not after the
 * batch). */
#define SLPY_SIGNAL_MS 100

/** next() on a loader closed while an iteration was under way: raises
 *  ValueError saying so (a plain StopIteration would pass for the end of
 *  the epoch). @return NULL. */
PyObject *slpy_closed_mid_iteration(const char *what);

/** Readies k's two types. @return 0, or -1 with an exception set. */
int slpy_kind_ready(slpy_kind_t *k);
/** A new Core owning `engine`. On failure the engine is destroyed.
 *  @return a new reference, or NULL with an exception set. */
slpy_core_t *slpy_core_new(slpy_kind_t *k, void *engine);
/** Gives batch b back to c's engine and counts it out of c->held. */
void slpy_core_release(slpy_core_t *c, const void *b);
/** A Batch owning b (already counted in c->held) and holding c. On failure
 *  b is released. @return a new reference, or NULL with an exception. */
slpy_batch_t *slpy_batch_new(slpy_core_t *c, const void *b);
/** A C-contiguous array of `type` over `data` whose base is `owner`.
 *  @return a new reference, or NULL with an exception set. */
/* A device batch's images: an object with __cuda_array_interface__ (v3,
 * no stream: the batch is complete when handed out) over `data` on CUDA
 * device `device`, keeping `owner` (the batch out of the pool) while it
 * lives, as torch.as_tensor(obj, device=...) expects; NULL with a Python
 * error set. */
PyObject *slpy_batch_cuda(slpy_batch_t *owner, const char *typestr, int nd,
                          npy_intp *dims, void *data, int device);
PyObject *slpy_batch_view(slpy_batch_t *owner, int type, int nd, npy_intp *dims,
                          void *data);
/** @return 0 when c is there, else 1 with "operation on a closed <what>"
 *  (ValueError) set. */
int slpy_closed(const slpy_core_t *c, const char *what);
/** The messages of the samples / documents c's engine skipped, as a list
 *  of str. @return a new reference, or NULL with an exception set. */
PyObject *slpy_skipped_list(const slpy_core_t *c);
/** None leaves *out; otherwise an int in [min, max] (ValueError naming
 *  `name` if not). @return 0, or -1 with an exception set. */
int slpy_parse_int(PyObject *o, const char *name, long min, long max, int *out);
/* A byte count: an int of at least min (`why` says what the least means,
 * in the error); None leaves *out. */
int slpy_parse_bytes(PyObject *v, const char *name, long long min,
                     const char *why, int64_t *out);
/** A seed: an int (numpy's too; not a float) in -2**63 .. 2**64-1, a
 * negative one taken as its 64-bit two's complement (as torch's
 * manual_seed range); beyond it is a ValueError, not reduced modulo
 * 2**64 (two seeds would give one stream). None leaves *out.
 * @return 0, or -1 with an exception set. */
int slpy_parse_seed(PyObject *o, unsigned long long *out);
/** For __enter__: @return self, a new reference. */
PyObject *slpy_return_self(PyObject *self, PyObject *unused);

/** Adds the Loader type to the module. @return 0, or -1 with an exception. */
int slpy_loader_init(PyObject *module);
/** Adds the TextLoader type (sluice_text.c). @return 0, or -1. */
int slpy_text_init(PyObject *module);
/** Adds load_volume, volume_info, volume_dataset (sluice_volume.c).
 *  @return 0, or -1. */
int slpy_volume_init(PyObject *module);
/** Adds VolumeLoader (sluice_vloader.c). @return 0 or -1. */
int slpy_vloader_init(PyObject *module);

#endif /* SLUICE_PY_H */
