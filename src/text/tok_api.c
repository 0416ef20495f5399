/* text/tok_api: the public tokenizer API (include/sluice/tokenizer.h) over
 * sl__tok_t. A tokenizer is immutable, but encoding needs scratch (the BPE
 * piece cache, regex match data) and an id vector; the handle keeps a small
 * stack of them, so that concurrent callers each take their own and a
 * caller that encodes repeatedly reuses warm ones. Errors go to a
 * thread-local buffer: no lock, and no thread overwrites another's. */
#include "base/abi.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/tokenizer.h"
#include "text/tokenizer.h"

#define TOK_API_MSG 512
#define TOK_API_SPARE 16 /* idle scratch kept; more are freed */

static _Thread_local char tl_err[TOK_API_MSG];

typedef struct tok_slot {
    sl__tok_scratch_t *s;
    sl__ids_t ids;
} tok_slot_t;

struct sl_tokenizer {
    sl__tok_t *tok;
    int allow_special;
    pthread_mutex_t mu; /* guards spare / nspare only */
    tok_slot_t *spare[TOK_API_SPARE];
    int nspare;
};

static void slot_free(tok_slot_t *slot)
{
    if (!slot)
        return;
    sl__tok_scratch_destroy(slot->s);
    sl__ids_free(&slot->ids);
    free(slot);
}

/* A spare slot, or a new one; NULL when out of memory. */
static tok_slot_t *slot_take(sl_tokenizer_t *t)
{
    tok_slot_t *slot = NULL;
    pthread_mutex_lock(&t->mu);
    if (t->nspare)
        slot = t->spare[--t->nspare];
    pthread_mutex_unlock(&t->mu);
    if (slot)
        return slot;
    slot = calloc(1, sizeof *slot);
    if (slot && !(slot->s = sl__tok_scratch_create())) {
        free(slot);
        slot = NULL;
    }
    return slot;
}

static void slot_give(sl_tokenizer_t *t, tok_slot_t *slot)
{
    pthread_mutex_lock(&t->mu);
    if (t->nspare < TOK_API_SPARE) {
        t->spare[t->nspare++] = slot;
        slot = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    slot_free(slot);
}

SL__ABI_INIT_PAIR(sl_tokenizer_options_init, sl_tokenizer_options_t)

int sl_tokenizer_create(const sl_tokenizer_options_t *opt, sl_tokenizer_t **out)
{
    if (!out || !opt || opt->size == 0)
        return sl__fail(tl_err, sizeof tl_err, SL_EINVAL,
                        "sl_tokenizer_create: %s",
                        !out || !opt ? "NULL argument"
                                     : "options not initialised (size 0)");
    *out = NULL;
    sl_tokenizer_options_t o;
    memset(&o, 0, sizeof o);
    memcpy(&o, opt, opt->size < sizeof o ? opt->size : sizeof o);
    sl_tokenizer_t *t = calloc(1, sizeof *t);
    if (!t)
        return sl__fail(tl_err, sizeof tl_err, SL_ENOMEM, "out of memory");
    int rc = sl__tok_open(o.name, o.vocab, o.merges, o.cased, &t->tok, tl_err,
                          sizeof tl_err);
    if (!rc && pthread_mutex_init(&t->mu, NULL)) {
        sl__tok_free(t->tok);
        rc = sl__fail(tl_err, sizeof tl_err, SL_ENOMEM, "out of memory");
    }
    if (rc) {
        free(t);
        return rc;
    }
    t->allow_special = o.allow_special != 0;
    *out = t;
    return 0;
}

int sl_tokenizer_encode(sl_tokenizer_t *t, const char *text, size_t len,
                        int32_t *ids, size_t cap, size_t *n)
{
    if (!t || !n || (!text && len) || (!ids && cap))
        return sl__fail(tl_err, sizeof tl_err, SL_EINVAL,
                        "sl_tokenizer_encode: invalid argument");
    *n = 0;
    tok_slot_t *slot = slot_take(t);
    if (!slot)
        return sl__fail(tl_err, sizeof tl_err, SL_ENOMEM, "out of memory");
    slot->ids.n = 0;
    int rc = sl__tok_encode(t->tok, text, len, t->allow_special, slot->s,
                            &slot->ids, tl_err, sizeof tl_err);
    if (!rc) {
        *n = slot->ids.n;
        size_t k = slot->ids.n < cap ? slot->ids.n : cap;
        if (k)
            memcpy(ids, slot->ids.v, k * sizeof *ids);
        if (slot->ids.n > cap)
            rc = sl__fail(tl_err, sizeof tl_err, SL_ERANGE,
                          "sl_tokenizer_encode: %zu ids, room for %zu",
                          slot->ids.n, cap);
    }
    slot_give(t, slot);
    return rc;
}

int sl_tokenizer_encode_file(sl_tokenizer_t *t, const char *path,
                             sl_tokenizer_emit_fn emit, void *ctx,
                             uint64_t *bytes)
{
    if (bytes)
        *bytes = 0;
    if (!t || !path || !emit)
        return sl__fail(tl_err, sizeof tl_err, SL_EINVAL,
                        "sl_tokenizer_encode_file: invalid argument");
    int fd = sl__open_regular(path, NULL, tl_err, sizeof tl_err);
    if (fd < 0)
        return fd;
    tok_slot_t *slot = slot_take(t);
    int rc = slot ? sl__tok_encode_fd(t->tok, fd, path, t->allow_special,
                                      slot->s, &slot->ids, emit, ctx, bytes,
                                      tl_err, sizeof tl_err)
                  : sl__fail(tl_err, sizeof tl_err, SL_ENOMEM, "out of memory");
    close(fd);
    if (slot)
        slot_give(t, slot);
    return rc;
}

size_t sl_tokenizer_vocab_size(const sl_tokenizer_t *t)
{
    return t ? sl__tok_vocab_size(t->tok) : 0;
}

const char *sl_tokenizer_last_error(const sl_tokenizer_t *t)
{
    (void)t; /* errors are per thread, not per handle */
    return tl_err;
}

void sl_tokenizer_destroy(sl_tokenizer_t *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nspare; i++)
        slot_free(t->spare[i]);
    pthread_mutex_destroy(&t->mu);
    sl__tok_free(t->tok);
    free(t);
}
