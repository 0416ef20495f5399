/*
 * sluice._sluice: the CPython extension over libsluice (private header).
 *
 * sluice_module.c  module init, sluice.Error, image_transform, version
 * sluice_loader.c  sluice.Loader and the objects that keep batches alive
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

/** Raises the exception for an engine failure `code` with message `msg`
 *  (NULL or empty: sl_strerror(code)): ValueError for SL_EINVAL/SL_ERANGE
 *  when `args_error` is set (a bad argument), MemoryError for SL_ENOMEM,
 *  sluice.Error otherwise. @return NULL, for `return slpy_raise(...)`. */
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

/** Adds the Loader type to the module. @return 0, or -1 with an exception. */
int slpy_loader_init(PyObject *module);
/** Adds the TextLoader type (sluice_text.c). @return 0, or -1. */
int slpy_text_init(PyObject *module);

#endif /* SLUICE_PY_H */
