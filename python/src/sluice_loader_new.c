/*
 * sluice.Loader's constructor: its keyword arguments checked and turned
 * into sl_options_t (each named in its error), then the engine made
 * (sluice_loader.c's Core). The loader itself: sluice_loader.c.
 */
#include "sluice_loader.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

static int opt_pair(PyObject *o, const char *name, double *a, double *b)
{
    if (o == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq || PySequence_Fast_GET_SIZE(seq) != 2) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a (min, max) pair", name);
        return -1;
    }
    *a = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, 0));
    *b = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, 1));
    Py_DECREF(seq);
    return PyErr_Occurred() ? -1 : 0;
}

static int str_choice(PyObject *o, const char *name, const char *a,
                      const char *b, int *out)
{
    if (o == Py_None)
        return 0;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && !strcmp(s, a))
        *out = 0;
    else if (s && !strcmp(s, b))
        *out = 1;
    else {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be '%s' or '%s', not %R", name,
                     a, b, o);
        return -1;
    }
    return 0;
}

/* host_alloc=(alloc, free[, set_device, device]): addresses of
 * cudaHostAlloc-like functions, int alloc(void **p, size_t n, unsigned
 * flags) and int free(void *p), that give the engine page-locked batch
 * buffers (sluice.torch finds CUDA's in the process for pin_memory=True);
 * with cudaSetDevice's address and a device, the engine's threads that
 * allocate set that device first: a CUDA allocation on a thread that set
 * none makes a context on GPU 0 (in every DDP rank). Process-wide
 * functions: one CUDA runtime; the device is the loader's (buffer_ctx:
 * device + 1, 0 for none). */
typedef int (*host_alloc_fn)(void **, size_t, unsigned);
typedef int (*host_free_fn)(void *);
typedef int (*set_device_fn)(int);
static host_alloc_fn g_host_alloc;
static host_free_fn g_host_free;
static set_device_fn g_set_device;

static void *host_buf_alloc(size_t n, void *ctx)
{
    int dev = (int)(intptr_t)ctx - 1;
    if (dev >= 0 && g_set_device && g_set_device(dev))
        return NULL;
    void *p = NULL;
    return g_host_alloc(&p, n, 0) == 0 ? p : NULL;
}

static void host_buf_free(void *p, void *ctx)
{
    (void)ctx;
    g_host_free(p);
}

static int opt_host_alloc(PyObject *v, sl_options_t *o)
{
    if (v == Py_None)
        return 0;
    unsigned long long a = 0, f = 0, sd = 0;
    int dev = -1;
    if (!PyTuple_Check(v)) {
        PyErr_SetString(PyExc_TypeError,
                        "host_alloc must be (alloc_address, free_address"
                        "[, set_device_address, device])");
        return -1;
    }
    if (!PyArg_ParseTuple(v,
                          "KK|Ki;host_alloc must be (alloc_address, "
                          "free_address[, set_device_address, device])",
                          &a, &f, &sd, &dev))
        return -1;
    if (!a || !f || (PyTuple_GET_SIZE(v) > 2 && (!sd || dev < 0))) {
        PyErr_SetString(PyExc_ValueError,
                        "host_alloc: null function address or negative "
                        "device");
        return -1;
    }
    g_host_alloc = (host_alloc_fn)(uintptr_t)a;
    g_host_free = (host_free_fn)(uintptr_t)f;
    if (sd)
        g_set_device = (set_device_fn)(uintptr_t)sd;
    o->buffer_alloc = host_buf_alloc;
    o->buffer_free = host_buf_free;
    o->buffer_ctx = sd ? (void *)(intptr_t)(dev + 1) : NULL;
    return 0;
}

/* A string among three names (None: leave *out), their values in vals;
 * else ValueError "NAME must be 'a', 'b' or 'c', not V". */
static int choice3(PyObject *v, const char *name, const char *const names[3],
                   const int vals[3], int *out)
{
    if (v == Py_None)
        return 0;
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = vals[i];
            return 0;
        }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s must be '%s', '%s' or '%s', not %R",
                 name, names[0], names[1], names[2], v);
    return -1;
}

/* policy='heuristic' | 'static' | 'rl' (sl_policy_t); None: the default. */
static int opt_policy(PyObject *v, int *out)
{
    static const char *const names[] = {"heuristic", "static", "rl"};
    static const int vals[] = {SL_POLICY_HEURISTIC, SL_POLICY_STATIC,
                               SL_POLICY_RL};
    return choice3(v, "policy", names, vals, out);
}

/* placement: None / 'auto', 'cpu' or 'gpu' (sl_placement_t). */
static int opt_placement(PyObject *v, int *out)
{
    static const char *const names[] = {"auto", "cpu", "gpu"};
    static const int vals[] = {SL_PLACEMENT_AUTO, SL_PLACEMENT_CPU,
                               SL_PLACEMENT_GPU};
    return choice3(v, "placement", names, vals, out);
}

/* An int in lo..hi or 'off' (giving `off`); None leaves *out. The shape
 * of io_depth and coalesce, as `sluice run --io-depth` / `--coalesce`. */
static int int_or_off(PyObject *v, const char *name, int lo, int hi, int off,
                      int *out)
{
    if (v == Py_None)
        return 0;
    if (PyUnicode_Check(v)) {
        const char *s = PyUnicode_AsUTF8(v);
        if (s && !strcmp(s, "off")) {
            *out = off;
            return 0;
        }
        PyErr_Format(PyExc_ValueError,
                     "%s must be an int in %d..%d or 'off', not %R", name, lo,
                     hi, v);
        return -1;
    }
    return slpy_parse_int(v, name, lo, hi, out);
}

/* io_depth: None (the policy's), an int >= 1, or 'off' (blocking reads). */
static int opt_io_depth(PyObject *v, int *out)
{
    return int_or_off(v, "io_depth", 1, 65536, SL_IO_DEPTH_OFF, out);
}

/* coalesce: None (1 MiB), bytes in 1..2**30, or 'off'. */
static int opt_coalesce(PyObject *v, int64_t *out)
{
    int n = (int)*out;
    if (v == Py_None)
        return 0;
    if (int_or_off(v, "coalesce", 1, 1 << 30, -1, &n))
        return -1;
    *out = n;
    return 0;
}

PyObject *slpy_loader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source",
                             "batch_size",
                             "image_size",
                             "mode",
                             "dtype",
                             "layout",
                             "shuffle",
                             "seed",
                             "drop_last",
                             "rank",
                             "world_size",
                             "epochs",
                             "unordered",
                             "on_error",
                             "threads",
                             "read_threads",
                             "prefetch",
                             "dct_scale",
                             "mean",
                             "std",
                             "telemetry_ms",
                             "telemetry_path",
                             "metrics_port",
                             "flip",
                             "scale",
                             "ratio",
                             "resize_size",
                             "host_alloc",
                             "policy",
                             "max_memory",
                             "shuffle_buffer",
                             "cache_bytes",
                             "cache_policy",
                             "cache_decoded",
                             "cache_codec",
                             "io_depth",
                             "max_threads",
                             "policy_file",
                             "placement",
                             "gpu_share",
                             "coalesce",
                             "gpu_device",
                             "device_batches",
                             "cache_dir",
                             "cache_disk_bytes",
                             "gpu_memory_bytes",
                             "timeout",
                             NULL};
    PyObject *source = NULL, *mode = Py_None, *dtype = Py_None;
    PyObject *layout = Py_None, *seed = Py_None, *on_error = Py_None;
    PyObject *threads = Py_None, *read_threads = Py_None;
    PyObject *prefetch = Py_None, *mean = Py_None, *std = Py_None;
    PyObject *tel_ms = Py_None, *tel_path = Py_None, *port = Py_None;
    PyObject *scale = Py_None, *ratio = Py_None, *resize = Py_None;
    PyObject *host_alloc = Py_None, *policy = Py_None, *max_mem = Py_None;
    int batch = 64, size = 224, shuffle = 1, drop_last = 0, rank = 0;
    int world = 1, unordered = 0, dct = 1, flip = 1, shuffle_buffer = 0;
    PyObject *cache_bytes = Py_None, *cache_policy = Py_None;
    PyObject *cache_codec = Py_None;
    PyObject *io_depth = Py_None, *max_threads = Py_None;
    PyObject *policy_file = Py_None;
    PyObject *placement = Py_None, *gpu_share = Py_None;
    PyObject *coalesce = Py_None, *gpu_device = Py_None;
    PyObject *cache_dir = Py_None, *cache_disk = Py_None;
    PyObject *gpu_memory = Py_None;
    int cache_decoded = 0, device_batches = 0;
    long long epochs = 1;
    double timeout_s = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw,
            "O&|ii$OOOpOpiiLpOOOOpOOOOOpOOOOOOiOOpOOOOOOOOpOOOd:Loader", kwlist,
            PyUnicode_FSConverter, &source, &batch, &size, &mode, &dtype,
            &layout, &shuffle, &seed, &drop_last, &rank, &world, &epochs,
            &unordered, &on_error, &threads, &read_threads, &prefetch, &dct,
            &mean, &std, &tel_ms, &tel_path, &port, &flip, &scale, &ratio,
            &resize, &host_alloc, &policy, &max_mem, &shuffle_buffer,
            &cache_bytes, &cache_policy, &cache_decoded, &cache_codec,
            &io_depth, &max_threads, &policy_file, &placement, &gpu_share,
            &coalesce, &gpu_device, &device_batches, &cache_dir, &cache_disk,
            &gpu_memory, &timeout_s))
        return NULL;
    LoaderObject *self = (LoaderObject *)type->tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(source);
        return NULL;
    }
    self->source = source;
    sl_options_t *o = &self->opt;
    sl_options_init(o);
    o->batch_size = batch;
    o->image_size = size;
    o->no_shuffle = !shuffle;
    o->shuffle_buffer = shuffle_buffer;
    o->drop_last = drop_last;
    o->rank = rank;
    o->world_size = world;
    o->unordered = unordered;
    o->no_dct_scale = !dct;
    o->no_flip = !flip;
    o->device_batches = device_batches;
    self->epochs = epochs;
    self->timeout_s = timeout_s;
    if (!(timeout_s >= 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "timeout must be >= 0 seconds (0: none)");
        goto fail;
    }
    if (batch < 1 || size < 1 || world < 1 || rank < 0 || rank >= world ||
        epochs < 1) {
        PyErr_Format(PyExc_ValueError,
                     "need batch_size >= 1, image_size >= 1, epochs >= 1 "
                     "and 0 <= rank < world_size (got %d, %d, %lld, %d, %d)",
                     batch, size, epochs, rank, world);
        goto fail;
    }
    unsigned long long seed_v = o->seed;
    if (slpy_parse_seed(seed, &seed_v))
        goto fail;
    o->seed = seed_v;
    if (str_choice(mode, "mode", "train", "eval", &o->mode) ||
        (dtype != Py_None && slpy_parse_dtype(dtype, &o->dtype)) ||
        (layout != Py_None && slpy_parse_layout(layout, &o->layout)) ||
        str_choice(on_error, "on_error", "fail", "skip", &o->on_error) ||
        slpy_parse_int(threads, "threads", 1, INT_MAX, &o->decode_threads) ||
        slpy_parse_int(read_threads, "read_threads", 1, INT_MAX,
                       &o->read_threads) ||
        slpy_parse_int(prefetch, "prefetch", 1, INT_MAX, &o->prefetch) ||
        slpy_parse_float3(mean, "mean", o->mean) ||
        slpy_parse_float3(std, "std", o->std) ||
        slpy_parse_int(tel_ms, "telemetry_ms", -1, 3600000, &o->telemetry_ms) ||
        slpy_parse_int(port, "metrics_port", 1, 65535, &o->metrics_port) ||
        opt_pair(scale, "scale", &o->scale_min, &o->scale_max) ||
        opt_pair(ratio, "ratio", &o->ratio_min, &o->ratio_max) ||
        slpy_parse_int(resize, "resize_size", 1, 1 << 16, &o->resize_size) ||
        opt_host_alloc(host_alloc, o) || opt_policy(policy, &o->policy) ||
        opt_io_depth(io_depth, &o->io_depth) ||
        opt_coalesce(coalesce, &o->coalesce_bytes) ||
        slpy_parse_int(max_threads, "max_threads", 2, 256, &o->max_threads) ||
        opt_placement(placement, &o->placement) ||
        slpy_parse_int(gpu_share, "gpu_share", 0, 1000, &o->gpu_share) ||
        slpy_parse_int(gpu_device, "gpu_device", 0, 1023, &o->gpu_device))
        goto fail;
    if (policy_file != Py_None &&
        !PyUnicode_FSConverter(policy_file, &self->policy_file))
        goto fail;
    if (slpy_parse_bytes(max_mem, "max_memory", 1, " byte",
                         &o->max_memory_bytes) ||
        slpy_parse_bytes(cache_bytes, "cache_bytes", 0, "", &o->cache_bytes) ||
        slpy_parse_bytes(cache_disk, "cache_disk_bytes", 1, " (with cache_dir)",
                         &o->cache_disk_bytes) ||
        slpy_parse_bytes(gpu_memory, "gpu_memory_bytes", 0, " (0: the default)",
                         &o->gpu_memory_bytes))
        goto fail;
    o->cache_decoded = cache_decoded;
    if (cache_dir != Py_None &&
        !PyUnicode_FSConverter(cache_dir, &self->cache_dir))
        goto fail;
    if (cache_codec != Py_None) {
        const char *cs =
            PyUnicode_Check(cache_codec) ? PyUnicode_AsUTF8(cache_codec) : NULL;
        o->cache_codec = -1;
        for (int i = 0; cs && i < 6; i++)
            if (!strcmp(cs, slpy_cache_codec_names[i]))
                o->cache_codec = i;
        if (o->cache_codec < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "cache_codec must be 'auto', 'none', 'lz4', "
                         "'zstd-1', 'zstd-3' or 'zstd-19', not %R",
                         cache_codec);
            goto fail;
        }
    }
    if (str_choice(cache_policy, "cache_policy", "minio", "lru",
                   &o->cache_policy))
        goto fail;
    if (tel_ms != Py_None && o->telemetry_ms == 0)
        o->telemetry_ms = -1; /* 0 means off here, not "the default" */
    if (tel_path != Py_None &&
        !PyUnicode_FSConverter(tel_path, &self->telemetry_path))
        goto fail;
    self->core = slpy_loader_core_create(self);
    if (!self->core)
        goto fail;
    self->nb = sl_loader_batches_per_epoch(self->core->engine);
    if (self->nb < 1) {
        PyErr_Format(PyExc_ValueError,
                     "no batch for this rank: %lld samples, world_size %d, "
                     "batch_size %d, drop_last %d",
                     (long long)sl_loader_num_samples(self->core->engine),
                     world, batch, drop_last);
        goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}
