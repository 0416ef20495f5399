/*
 * sluice.TextLoader: iterates an sl_text_loader_t, yielding dicts of int32
 * numpy arrays (input_ids, labels; mlm also attention_mask,
 * token_type_ids) that are views of the engine's pooled batch buffers.
 *
 * Ownership, as sluice.Loader's (the Core / Batch objects of sluice_core.c):
 * a TextCore owns the engine; a TextBatch owns one handed-out batch, is the
 * numpy base of its arrays and holds the TextCore; the last array gone
 * gives the buffer back (sl_text_loader_release, any thread). The engine's
 * buffers are independent of its workers, so a restart (start()) never waits
 * for the user's batches.
 *
 * Everything here runs under the GIL; it is released around the engine
 * calls that wait or work (create, start, next, destroy).
 */
#include "sluice/text.h"
#include "sluice_py.h"

#include <limits.h>
#include <string.h>

static void engine_destroy(void *l)
{
    sl_text_loader_destroy(l);
}

static void engine_release(void *l, const void *b)
{
    sl_text_loader_release(l, b);
}

static const char *engine_skipped(const void *l, int64_t i)
{
    return sl_text_loader_skipped_message(l, i);
}

static slpy_kind_t text_kind = {
    .core_name = "sluice._sluice._TextCore",
    .core_doc = "The engine behind a TextLoader (internal).",
    .batch_name = "sluice._sluice._TextBatchBuffer",
    .batch_doc = "Keeps one text batch out of the pool while arrays view it "
                 "(internal).",
    .destroy = engine_destroy,
    .release = engine_release,
    .skipped = engine_skipped,
    .skipped_utf8 = 1,
};

/* d[name] = an (n, seq_len) int32 view of p whose base is owner. */
static int put_view(PyObject *d, const char *name, slpy_batch_t *owner,
                    const sl_text_batch_t *b, int32_t *p)
{
    npy_intp dims[2] = {b->n, b->seq_len};
    PyObject *a = slpy_batch_view(owner, NPY_INT32, 2, dims, p);
    if (!a)
        return -1;
    int rc = PyDict_SetItemString(d, name, a);
    Py_DECREF(a);
    return rc;
}

/* The dict of arrays over b, which `core` handed out (counted in its held
 * count). On failure the batch is released. */
static PyObject *make_dict(slpy_core_t *core, const sl_text_batch_t *b)
{
    slpy_batch_t *o = slpy_batch_new(core, b);
    if (!o)
        return NULL;
    PyObject *d = PyDict_New();
    if (!d || put_view(d, "input_ids", o, b, b->input_ids) ||
        put_view(d, "labels", o, b, b->labels) ||
        (b->attention_mask &&
         (put_view(d, "attention_mask", o, b, b->attention_mask) ||
          put_view(d, "token_type_ids", o, b, b->token_type_ids))))
        Py_CLEAR(d);
    Py_DECREF(o);
    return d;
}

typedef struct {
    PyObject_HEAD slpy_core_t *core; /* NULL once closed */
    PyObject *keep;                  /* bytes objects the options use */
    sl_text_options_t opt;
    int64_t epoch, batch; /* next batch to yield */
    int active, busy;
    int closed_mid; /* close() came during an iteration */
} TextLoaderObject;

static int tl_closed(TextLoaderObject *self)
{
    return slpy_closed(self->core, "TextLoader");
}

static PyObject *tl_two_threads(void)
{
    return PyErr_Format(PyExc_RuntimeError,
                        "sluice.TextLoader used by two threads at once");
}

/* sl_text_loader_start, one thread at a time (busy, as next()); the Core
 * is held across the call, so a close() meanwhile frees the engine only
 * after it, here. */
static int tl_start(TextLoaderObject *self, int64_t e, int64_t b)
{
    if (self->busy) {
        tl_two_threads();
        return -1;
    }
    sl_position_t p = {e, b};
    slpy_core_t *core = self->core;
    Py_INCREF(core);
    int rc;
    char msg[1024];
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_text_loader_start(core->engine, &p);
    if (rc) /* thread-local: read it on this thread */
        snprintf(msg, sizeof msg, "%s",
                 sl_text_loader_last_error(core->engine));
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    int closed = self->core != core;
    Py_DECREF(core);
    if (rc) {
        slpy_raise(rc, msg, 1);
        return -1;
    }
    if (closed)
        return tl_closed(self) ? -1 : 0;
    self->epoch = e, self->batch = b;
    self->active = 1;
    return 0;
}

static PyObject *tl_iter(TextLoaderObject *self)
{
    if (tl_closed(self))
        return NULL;
    if (!self->active && tl_start(self, self->epoch, self->batch))
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *tl_next(TextLoaderObject *self)
{
    if (!self->core && self->closed_mid)
        return slpy_closed_mid_iteration("sluice.TextLoader");
    if (!self->core || !self->active)
        return NULL;
    if (self->busy)
        return tl_two_threads();
    slpy_core_t *core = self->core;
    Py_INCREF(core);
    const sl_text_batch_t *b = NULL;
    int rc;
    self->busy = 1;
    /* In slices that let a signal in: Ctrl-C raises KeyboardInterrupt
     * within SLPY_SIGNAL_MS, nothing handed out, the position kept (the
     * rows gathered so far wait in the engine for the next call). */
    int interrupted = 0;
    do {
        Py_BEGIN_ALLOW_THREADS;
        rc = sl_text_loader_next_timeout(core->engine, &b, SLPY_SIGNAL_MS);
        Py_END_ALLOW_THREADS;
    } while (rc == SL_ETIMEDOUT && !(interrupted = PyErr_CheckSignals()));
    self->busy = 0;
    sl_position_t p;
    sl_text_loader_position(core->engine, &p);
    PyObject *r = NULL;
    if (interrupted)
        ; /* the exception is set; the loader goes on from here */
    else if (rc == SL_EEND)
        self->active = 0;
    else if (rc) {
        self->active = 0;
        slpy_raise(rc, sl_text_loader_last_error(core->engine), 0);
    } else {
        core->held++;
        r = make_dict(core, b);
    }
    if (self->core == core) {
        self->epoch = p.epoch;
        self->batch = p.batch;
    }
    Py_DECREF(core);
    return r;
}

static PyObject *tl_start_m(TextLoaderObject *self, PyObject *args,
                            PyObject *kw)
{
    static char *kwlist[] = {"epoch", "batch", NULL};
    long long e = 0, b = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|LL", kwlist, &e, &b) ||
        tl_closed(self))
        return NULL;
    if (e < 0 || b < 0)
        return PyErr_Format(PyExc_ValueError,
                            "position (%lld, %lld) must be >= 0", e, b);
    if (tl_start(self, e, b))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *tl_stats(TextLoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (tl_closed(self))
        return NULL;
    sl_text_stats_t s;
    sl_text_stats_init(&s);
    sl_text_loader_stats(self->core->engine, &s);
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:L,s:L}", "sequences",
        (long long)s.sequences, "batches", (long long)s.batches, "tokens",
        (long long)s.tokens, "tokens_encoded", (long long)s.tokens_encoded,
        "tokens_dropped", (long long)s.tokens_dropped, "bytes_read",
        (long long)s.bytes_read, "errors_skipped", (long long)s.errors_skipped,
        "wait_s", (double)s.wait_ns / 1e9, "epoch", (long long)self->epoch,
        "batch", (long long)self->batch);
}

static PyObject *tl_skipped(TextLoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (tl_closed(self))
        return NULL;
    return slpy_skipped_list(self->core);
}

static PyObject *tl_close(TextLoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (self->core)
        self->closed_mid = self->active;
    self->active = 0;
    Py_CLEAR(self->core); /* the engine goes with the last batch */
    Py_RETURN_NONE;
}

static PyObject *tl_exit(TextLoaderObject *self, PyObject *args)
{
    (void)args;
    return tl_close(self, NULL);
}

static void tl_dealloc(TextLoaderObject *self)
{
    Py_CLEAR(self->core);
    Py_CLEAR(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A str / PathLike option as bytes kept in self->keep; None leaves *out. */
static int path_opt(TextLoaderObject *self, PyObject *o, const char **out)
{
    if (o == Py_None)
        return 0;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(o, &b))
        return -1;
    int rc = PyList_Append(self->keep, b);
    Py_DECREF(b);
    if (rc)
        return -1;
    *out = PyBytes_AS_STRING(b);
    return 0;
}

static PyObject *tl_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"sources",      "task",         "tokenizer",
                             "vocab",        "merges",       "cased",
                             "doc_per_file", "seq_len",      "batch_size",
                             "shuffle",      "seed",         "drop_last",
                             "rank",         "world_size",   "epochs",
                             "threads",      "on_error",     "mask_prob",
                             "chunk_bytes",  "group_chunks", "prefetch_chunks",
                             "eos_id",       "max_memory",   NULL};
    PyObject *sources, *task = Py_None, *tok = Py_None, *vocab = Py_None;
    PyObject *merges = Py_None, *seq = Py_None, *seed = Py_None;
    PyObject *threads = Py_None, *on_error = Py_None, *mask = Py_None;
    PyObject *chunk = Py_None, *group = Py_None, *pf = Py_None;
    PyObject *eos = Py_None, *max_mem = Py_None;
    int cased = 0, per_file = 0, batch = 8, shuffle = 1, drop_last = 0;
    int rank = 0, world = 1;
    long long epochs = 1;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O|$OOOOppOipOpiiLOOOOOOOO:TextLoader", kwlist, &sources,
            &task, &tok, &vocab, &merges, &cased, &per_file, &seq, &batch,
            &shuffle, &seed, &drop_last, &rank, &world, &epochs, &threads,
            &on_error, &mask, &chunk, &group, &pf, &eos, &max_mem))
        return NULL;
    TextLoaderObject *self = (TextLoaderObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->keep = PyList_New(0);
    if (!self->keep)
        goto fail;
    sl_text_options_t *o = &self->opt;
    sl_text_options_init(o);
    o->cased = cased;
    o->doc_per_file = per_file;
    o->batch_size = batch;
    o->no_shuffle = !shuffle;
    o->drop_last = drop_last;
    o->rank = rank;
    o->world_size = world;
    o->epochs = epochs;
    if (batch < 1 || world < 1 || rank < 0 || rank >= world || epochs < 1) {
        PyErr_Format(PyExc_ValueError,
                     "need batch_size >= 1, epochs >= 1 and 0 <= rank < "
                     "world_size (got %d, %lld, %d, %d)",
                     batch, epochs, rank, world);
        goto fail;
    }
    if (task != Py_None) {
        const char *s = PyUnicode_Check(task) ? PyUnicode_AsUTF8(task) : NULL;
        if (s && !strcmp(s, "lm"))
            o->task = SL_TEXT_LM;
        else if (s && !strcmp(s, "mlm"))
            o->task = SL_TEXT_MLM;
        else {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "task must be 'lm' or 'mlm', not %R",
                         task);
            goto fail;
        }
    }
    if (on_error != Py_None) {
        const char *s =
            PyUnicode_Check(on_error) ? PyUnicode_AsUTF8(on_error) : NULL;
        if (s && !strcmp(s, "skip"))
            o->on_error = SL_ON_ERROR_SKIP;
        else if (!s || strcmp(s, "fail")) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "on_error must be 'skip' or 'fail', not %R", on_error);
            goto fail;
        }
    }
    if (tok != Py_None) {
        PyObject *b = PyUnicode_AsUTF8String(tok);
        if (!b || PyList_Append(self->keep, b)) {
            Py_XDECREF(b);
            goto fail;
        }
        Py_DECREF(b);
        o->tokenizer = PyBytes_AS_STRING(b);
    }
    if (vocab == Py_None) {
        PyErr_SetString(PyExc_ValueError, "vocab= is required");
        goto fail;
    }
    if (path_opt(self, vocab, &o->vocab) ||
        path_opt(self, merges, &o->merges) ||
        slpy_parse_int(seq, "seq_len", 1, 1 << 24, &o->seq_len) ||
        slpy_parse_int(threads, "threads", 1, INT_MAX, &o->decode_threads) ||
        slpy_parse_int(group, "group_chunks", 1, 4096, &o->group_chunks) ||
        slpy_parse_int(pf, "prefetch_chunks", 1, 65536, &o->prefetch_chunks) ||
        slpy_parse_bytes(max_mem, "max_memory", 1, " byte",
                         &o->max_memory_bytes))
        goto fail;
    unsigned long long seed_v = o->seed;
    if (slpy_parse_seed(seed, &seed_v))
        goto fail;
    o->seed = seed_v;
    if (mask != Py_None) { /* 0.0: no masking (as HF's mlm_probability) */
        o->mask_prob = PyFloat_AsDouble(mask);
        if (o->mask_prob == -1.0 && PyErr_Occurred())
            goto fail;
        if (!(o->mask_prob >= 0 && o->mask_prob <= 1)) {
            PyErr_Format(PyExc_ValueError,
                         "mask_prob must be in [0, 1] (0: no masking), not %R",
                         mask);
            goto fail;
        }
        o->given |= SL_TEXT_GIVEN_MASK_PROB;
    }
    if (chunk != Py_None && (o->chunk_bytes = PyLong_AsLongLong(chunk)) == -1 &&
        PyErr_Occurred())
        goto fail;
    if (eos != Py_None) { /* None: the tokenizer's; 0 is token 0 */
        if (slpy_parse_int(eos, "eos_id", 0, INT32_MAX, &o->eos_id))
            goto fail;
        o->given |= SL_TEXT_GIVEN_EOS_ID; /* < vocab size: the engine's */
    }
    /* sources: one path or a sequence of paths */
    PyObject *seqo = (PyUnicode_Check(sources) || PyBytes_Check(sources) ||
                      PyObject_HasAttrString(sources, "__fspath__"))
                         ? NULL
                         : PySequence_Fast(sources, "sources must be a path "
                                                    "or a sequence of paths");
    if (!seqo && PyErr_Occurred())
        goto fail;
    Py_ssize_t n = seqo ? PySequence_Fast_GET_SIZE(seqo) : 1;
    const char **paths = PyMem_Calloc((size_t)(n ? n : 1), sizeof *paths);
    int bad = !paths;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = path_opt(self, seqo ? PySequence_Fast_GET_ITEM(seqo, i) : sources,
                       &paths[i]);
    Py_XDECREF(seqo);
    if (bad) {
        PyMem_Free(paths);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    sl_text_loader_t *l = NULL;
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS;
    rc = sl_text_loader_create(paths, (int)n, o, &l);
    if (rc)
        snprintf(msg, sizeof msg, "%s", sl_text_loader_last_error(NULL));
    Py_END_ALLOW_THREADS;
    PyMem_Free(paths);
    if (rc) {
        slpy_raise(rc, msg, 1);
        goto fail;
    }
    self->core = slpy_core_new(&text_kind, l);
    if (!self->core)
        goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *tl_get_position(TextLoaderObject *self, void *c)
{
    (void)c;
    return Py_BuildValue("(LL)", (long long)self->epoch,
                         (long long)self->batch);
}

static PyObject *tl_get_docs(TextLoaderObject *self, void *c)
{
    (void)c;
    if (tl_closed(self))
        return NULL;
    return PyLong_FromLongLong(
        sl_text_loader_num_documents(self->core->engine));
}

static PyObject *tl_get_vocab(TextLoaderObject *self, void *c)
{
    (void)c;
    if (tl_closed(self))
        return NULL;
    return PyLong_FromLongLong(sl_text_loader_vocab_size(self->core->engine));
}

static PyObject *tl_get_fingerprint(TextLoaderObject *self, void *c)
{
    (void)c;
    if (tl_closed(self))
        return NULL;
    char hex[17];
    snprintf(
        hex, sizeof hex, "%016llx",
        (unsigned long long)sl_text_loader_fingerprint(self->core->engine));
    return PyUnicode_FromString(hex);
}

static PyObject *tl_get_options(TextLoaderObject *self, void *c)
{
    (void)c;
    sl_text_options_t used; /* the engine's, defaults resolved, when open */
    sl_text_options_init(&used);
    const sl_text_options_t *o =
        self->core && !sl_text_loader_options(self->core->engine, &used)
            ? &used
            : &self->opt;
    return Py_BuildValue(
        "{s:s,s:i,s:i,s:O,s:K,s:O,s:i,s:i,s:L,s:L,s:i,s:s}", "task",
        o->task == SL_TEXT_MLM ? "mlm" : "lm", "seq_len", o->seq_len,
        "batch_size", o->batch_size, "shuffle",
        o->no_shuffle ? Py_False : Py_True, "seed", (unsigned long long)o->seed,
        "drop_last", o->drop_last ? Py_True : Py_False, "rank", o->rank,
        "world_size", o->world_size, "epochs", (long long)o->epochs,
        "chunk_bytes", (long long)o->chunk_bytes, "threads", o->decode_threads,
        "on_error", o->on_error == SL_ON_ERROR_SKIP ? "skip" : "fail");
}

static PyObject *tl_get_closed(TextLoaderObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->core == NULL);
}

static PyGetSetDef tl_getset[] = {
    {"position", (getter)tl_get_position, NULL,
     "(epoch, batch) of the next batch: start(*position) on a TextLoader "
     "with the same options resumes exactly there.",
     NULL},
    {"num_documents", (getter)tl_get_docs, NULL,
     "Documents in the sources (bad ones included).", NULL},
    {"vocab_size", (getter)tl_get_vocab, NULL, NULL, NULL},
    {"fingerprint", (getter)tl_get_fingerprint, NULL,
     "What decides the stream (tokenizer and its files, the documents' "
     "count and sizes, the options but rank and threads), as 16 hex digits: "
     "a saved position resumes only on a loader with the same one.",
     NULL},
    {"options", (getter)tl_get_options, NULL, "The options, as a dict.", NULL},
    {"closed", (getter)tl_get_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef tl_methods[] = {
    {"start", (PyCFunction)(void (*)(void))tl_start_m,
     METH_VARARGS | METH_KEYWORDS,
     "start(epoch=0, batch=0)\n--\n\nThe next iteration yields from (epoch, "
     "batch) to the end of epoch + epochs - 1."},
    {"stats", (PyCFunction)tl_stats, METH_NOARGS,
     "stats()\n--\n\nCounters (sequences, tokens, ...) and position."},
    {"skipped", (PyCFunction)tl_skipped, METH_NOARGS,
     "skipped()\n--\n\nMessages of the bad documents met (FILE:LINE: "
     "cause)."},
    {"close", (PyCFunction)tl_close, METH_NOARGS,
     "close()\n--\n\nStops iteration (an iteration under way raises "
     "ValueError at its next\nbatch); the engine goes with the last batch."},
    {"__enter__", (PyCFunction)slpy_return_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)tl_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

PyDoc_STRVAR(
    tl_doc,
    "TextLoader(sources, *, task='lm', tokenizer=None, vocab, merges=None, "
    "cased=False, doc_per_file=False, seq_len=None, batch_size=8, "
    "shuffle=True, seed=0, drop_last=False, rank=0, world_size=1, "
    "epochs=1, threads=None, on_error='fail', mask_prob=None, "
    "chunk_bytes=None, group_chunks=None, prefetch_chunks=None, "
    "eos_id=None, max_memory=None)\n--\n\n"
    "Streams text batches: dicts of int32 numpy arrays (n, seq_len):\n"
    "lm: input_ids, labels; mlm: also attention_mask, token_type_ids\n"
    "(docs/TEXT.md). The arrays are views of the engine's buffers (no\n"
    "copy); a buffer returns to the pool when its arrays are gone. One\n"
    "iteration streams `epochs` epochs; the next continues after them.\n"
    "max_memory (bytes) bounds batch buffers and documents being\n"
    "tokenized, as sluice run --task lm --max-memory: a document that can\n"
    "never fit is a bad document (on_error). Default: half the cgroup's\n"
    "memory limit in a container that has one, else none.");

static PyTypeObject TextLoader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.TextLoader",
    .tp_basicsize = sizeof(TextLoaderObject),
    .tp_dealloc = (destructor)tl_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = tl_doc,
    .tp_iter = (getiterfunc)tl_iter,
    .tp_iternext = (iternextfunc)tl_next,
    .tp_methods = tl_methods,
    .tp_getset = tl_getset,
    .tp_new = tl_new,
};

int slpy_text_init(PyObject *m)
{
    if (slpy_kind_ready(&text_kind) || PyType_Ready(&TextLoader_Type))
        return -1;
    Py_INCREF(&TextLoader_Type);
    if (PyModule_AddObject(m, "TextLoader", (PyObject *)&TextLoader_Type)) {
        Py_DECREF(&TextLoader_Type);
        return -1;
    }
    return 0;
}
