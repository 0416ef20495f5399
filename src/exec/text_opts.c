/* The text loader's options: defaults, checks, the thread and memory
 * budgets they make (sched/limits.h), the fingerprint of the stream they
 * make, and the public sl_text_options_init / sl_text_loader_options. */
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#include "base/abi.h"
#include "core/options.h"
#include "sluice/text.h"
#include "telemetry/machine.h"
#include "text_internal.h"

SL__ABI_INIT_PAIR(sl_text_options_init, sl_text_options_t)

/* An option outside its range: the message names it and the range. */
static int out_of_range(char *err, size_t errlen, const char *name, long long v,
                        long long lo, long long hi)
{
    return sl__fail(err, errlen, SL_EINVAL,
                    "invalid text option %s = %lld: it must be in %lld..%lld",
                    name, v, lo, hi);
}

size_t sl__text_batch_block(const sl_text_options_t *o)
{
    size_t arrays = o->task == SL_TEXT_LM ? 2 : 4;
    return TL_HEADER + arrays * (size_t)o->batch_size * (size_t)o->seq_len *
                           sizeof(int32_t);
}

int sl__text_resolve(sl_text_options_t *o, sl__limits_t *lim, char *err,
                     size_t errlen)
{
    sl__common_opts_t c = {&o->world_size, &o->rank, &o->epochs, &o->on_error,
                           &o->policy};
    int rc = sl__opts_common(&c, err, errlen);
    if (rc)
        return rc;
    int lm = o->task == SL_TEXT_LM;
    if (o->task != SL_TEXT_LM && o->task != SL_TEXT_MLM)
        return sl__fail(err, errlen, SL_EINVAL, "unknown text task %d",
                        o->task);
    if (!o->tokenizer)
        o->tokenizer = lm ? "gpt2" : "wordpiece";
    if (!o->seq_len)
        o->seq_len = lm ? 1024 : 512;
    if (!o->batch_size)
        o->batch_size = 8;
    if (o->mask_prob == 0 && !(o->given & SL_TEXT_GIVEN_MASK_PROB))
        o->mask_prob = 0.15;
    if (!o->chunk_bytes)
        o->chunk_bytes = 256 << 10;
    if (!o->group_chunks)
        o->group_chunks = 16;
    if (!o->prefetch_chunks)
        o->prefetch_chunks = 2 * o->group_chunks;
    if (o->telemetry_ms == 0)
        o->telemetry_ms = 100;
    const struct {
        const char *name;
        long long v, lo, hi;
    } ranges[] = {
        {"seq_len", o->seq_len, lm ? 1 : 4, 1 << 24},
        {"batch_size", o->batch_size, 1, 1 << 20},
        {"decode_threads", o->decode_threads, SL_AUTOTUNE, SL__THREADS_MAX},
        {"chunk_bytes", o->chunk_bytes, 1, INT64_MAX},
        {"group_chunks", o->group_chunks, 1, 4096},
        {"prefetch_chunks", o->prefetch_chunks, o->group_chunks, 65536},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++)
        if (ranges[i].v < ranges[i].lo || ranges[i].v > ranges[i].hi)
            return out_of_range(err, errlen, ranges[i].name, ranges[i].v,
                                ranges[i].lo, ranges[i].hi);
    if (!(o->mask_prob >= 0 && o->mask_prob <= 1)) /* NaN too */
        return sl__fail(err, errlen, SL_EINVAL,
                        "invalid text option mask_prob = %g: it must be in "
                        "[0, 1] (0: no masking)",
                        o->mask_prob);
    if (o->max_memory_bytes < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "invalid text option max_memory_bytes = %lld: >= 0 "
                        "(0: no budget)",
                        (long long)o->max_memory_bytes);
    if (o->eos_id < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "invalid text option eos_id = %d: a token id is >= 0 "
                        "(0 with SL_TEXT_GIVEN_EOS_ID is token 0)",
                        (int)o->eos_id);
    /* The budget rule (sched/limits.h) with the text pipeline's shape:
     * one stage, the tokenizers, in the decode stage's place (the
     * consumer's copy into batches takes the "+ 1" the read stage takes
     * in the image loader); no read stage and a fixed chunk ring: only
     * the tokenizing threads are tuned. A memory budget splits as the
     * image loader's: its working share (read + decode) is the
     * tokenizers' (setup), batch buffers get the rest. */
    sl_options_t shape;
    sl_options_init(&shape);
    shape.policy = o->policy;
    shape.policy_file = NULL;
    shape.max_threads = o->max_threads;
    shape.read_threads = 1;
    shape.decode_threads = o->decode_threads > 0 ? o->decode_threads : 0;
    shape.prefetch = o->prefetch_chunks;
    shape.max_memory_bytes = o->max_memory_bytes;
    sl__knobs_t start;
    rc = sl__limits_make_named(&shape, sl__cpus_usable(),
                               sl__text_batch_block(o), "tokenizing", lim,
                               &start, err, errlen);
    if (rc)
        return rc;
    o->decode_threads = start.decode_threads;
    return 0;
}

/* Hashes file `path`'s bytes into h (NULL: nothing). Read as the
 * tokenizer reads its files (sl__read_small_file: regular, capped, named):
 * a file the tokenizer does not read (merges beside a tiktoken or
 * WordPiece vocabulary) is hashed too, and a FIFO there would block an
 * fopen for ever, a directory fail as "read error". */
static int hash_file(XXH3_state_t *h, const char *path, char *err,
                     size_t errlen)
{
    if (!path)
        return 0;
    char *text;
    size_t n;
    int rc =
        sl__read_small_file(path, SL__VOCAB_MAX_BYTES, &text, &n, err, errlen);
    if (rc)
        return rc;
    XXH3_64bits_update(h, text, n);
    free(text);
    return 0;
}

int sl__text_fingerprint(sl_text_loader_t *l, char *err, size_t errlen)
{
    const sl_text_options_t *o = &l->opt;
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    XXH3_64bits_reset(h);
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "sluice-text 1|%d|%s|%d|%d|%d|%d|%llu|%d|%d|%d|%d|%a|%lld|"
                     "%d|%lld|",
                     o->task, o->tokenizer, o->cased, o->doc_per_file,
                     o->seq_len, o->batch_size, (unsigned long long)o->seed,
                     o->no_shuffle, o->drop_last, o->world_size,
                     (int)l->spec.eos, o->mask_prob, (long long)o->chunk_bytes,
                     o->group_chunks, (long long)sl__tok_vocab_size(l->tok));
    XXH3_64bits_update(h, buf, (size_t)n);
    int rc = hash_file(h, o->vocab, err, errlen);
    if (!rc)
        rc = hash_file(h, o->merges, err, errlen);
    int64_t nd = sl__textsrc_count(l->src);
    XXH3_64bits_update(h, &nd, sizeof nd);
    for (int64_t i = 0; i < nd; i++) {
        uint64_t sz = sl__textsrc_size(l->src, i);
        XXH3_64bits_update(h, &sz, sizeof sz);
    }
    l->fingerprint = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return rc;
}

int sl_text_loader_options(const sl_text_loader_t *l, sl_text_options_t *out)
{
    if (!l || !out)
        return SL_EINVAL;
    return sl__abi_out(out, &l->opt, sizeof l->opt, SL__TEXT_OPTIONS_V1_SIZE);
}
