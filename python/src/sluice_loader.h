/*
 * sluice.Loader's object, shared by its two files (private):
 * sluice_loader.c (iteration, start / plans, knobs, stats, the type) and
 * sluice_loader_new.c (the constructor and its arguments).
 */
#ifndef SLUICE_LOADER_H
#define SLUICE_LOADER_H

#include "sluice_py.h"

#include <stdint.h>

/* Epochs an ordered engine is started for: the Loader ends each
 * iteration itself (sluice_loader.c's head comment). */
#define SLPY_EPOCHS_AHEAD ((int64_t)1 << 24)

typedef slpy_core_t CoreObject;

typedef struct {
    PyObject_HEAD CoreObject *core; /* NULL once closed */
    PyObject *source;               /* bytes (file-system encoding) */
    PyObject *telemetry_path;       /* bytes or NULL */
    PyObject *policy_file;          /* bytes or NULL */
    PyObject *cache_dir;            /* bytes or NULL */
    PyObject *classes;              /* tuple of str, made on first use */
    sl_options_t opt;               /* as given; knobs re-read on re-create */
    int64_t epochs;                 /* per iteration */
    int64_t nb;                     /* batches per epoch (this rank) */
    int running;                    /* the Core's engine was started */
    int active;                     /* an iteration is under way */
    int busy;                       /* in next/start: one thread at a time */
    int closed_mid;                 /* close() came during an iteration */
    int plan;                       /* the engine streams a plan */
    int64_t pos_g;                  /* next batch to yield, epoch * nb + i */
    int64_t end_g;                  /* the iteration ends before this */
    const sl_batch_t *pending;      /* got past end_g, kept for later */
    int64_t pending_g;
    double timeout_s; /* next() waits at most this long (0: as long) */
} LoaderObject;

/** A new Core from self's options, knobs as they are now; NULL with the
 *  engine's error raised. */
CoreObject *slpy_loader_core_create(LoaderObject *self);

/** sl_cache_codec_t's names, by value (the cache_codec argument, stats). */
extern const char *const slpy_cache_codec_names[6];

/** sluice.Loader's tp_new. */
PyObject *slpy_loader_new(PyTypeObject *type, PyObject *args, PyObject *kw);

#endif
