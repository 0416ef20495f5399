/* Text batches (sl_text_loader_*): determinism across thread counts,
 * resume == uninterrupted, ranks partition the windows, lm labels are the
 * inputs shifted and the windows are the document stream cut in order,
 * mlm layout ([CLS]/[SEP], masks, types) and masking rates (15 %, 80/10/10),
 * sources (text, JSON Lines, zstd text shards give the same batches), and
 * bad documents (skipped, counted, named FILE:LINE; or failing the run).
 * Self-contained: a tiny generated WordPiece vocabulary and corpus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/utf8.h"
#include "codec/codec.h"
#include "data/shard.h"
#include "sluice/telemetry.h"
#include "sluice/text.h"
#include "testutil.h"
#include "text/textsrc.h"
#include "text/tokenizer.h"

static char *dir;
static char vocab[1024], corpus[1024], jsonl[1024];
enum { PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, NLETTER = 26 };
static int ndocs;

/* Words of 1..6 letters from a fixed LCG: every document tokenizes to
 * letters and ##letters. */
static void make_doc(unsigned *st, char *out, size_t cap)
{
    int words = 1 + (int)((*st = *st * 1103515245u + 12345u) >> 16) % 40;
    size_t n = 0;
    for (int w = 0; w < words && n + 8 < cap; w++) {
        int len = 1 + (int)((*st = *st * 1103515245u + 12345u) >> 16) % 6;
        for (int i = 0; i < len; i++)
            out[n++] =
                (char)('a' + ((*st = *st * 1103515245u + 12345u) >> 16) % 26);
        out[n++] = ' ';
    }
    out[n - 1] = 0;
}

static int setup(void **state)
{
    (void)state;
    dir = tu_tmpdir("text_loader");
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
    FILE *f = fopen(vocab, "w");
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", f);
    for (int i = 0; i < NLETTER; i++)
        fprintf(f, "%c\n", 'a' + i);
    for (int i = 0; i < NLETTER; i++)
        fprintf(f, "##%c\n", 'a' + i);
    fclose(f);
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    snprintf(jsonl, sizeof jsonl, "%s/corpus.jsonl", dir);
    FILE *t = fopen(corpus, "w"), *j = fopen(jsonl, "w");
    unsigned st = 7;
    char doc[512];
    ndocs = 600;
    for (int i = 0; i < ndocs; i++) {
        make_doc(&st, doc, sizeof doc);
        fprintf(t, "%s\n", doc);
        fprintf(j, "{\"id\": %d, \"text\": \"%s\"}\n", i, doc);
        if (i % 50 == 0) { /* blank lines are no documents */
            fputs("\n", t);
            fputs("  \n", j);
        }
    }
    fclose(t);
    fclose(j);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    free(dir);
    return 0;
}

static sl_text_options_t lm_opt(int threads)
{
    sl_text_options_t o;
    sl_text_options_init(&o);
    o.task = SL_TEXT_LM;
    o.tokenizer = "wordpiece";
    o.vocab = vocab;
    o.seq_len = 31;
    o.batch_size = 5;
    o.seed = 42;
    o.decode_threads = threads;
    o.chunk_bytes = 700; /* many chunks, several groups */
    o.group_chunks = 3;
    o.epochs = 2;
    return o;
}

static sl_text_loader_t *open_one(const char *path, const sl_text_options_t *o)
{
    sl_text_loader_t *l = NULL;
    int rc = sl_text_loader_create(&path, 1, o, &l);
    if (rc)
        fprintf(stderr, "create: %s\n", sl_text_loader_last_error(NULL));
    assert_int_equal(rc, 0);
    return l;
}

/* Every batch from pos to the end: one hash per row (and the count). */
typedef struct rows {
    uint64_t *h;
    int64_t n, cap, batches;
    uint64_t digest;
} rows_t;

static void run(sl_text_loader_t *l, const sl_position_t *pos, rows_t *r,
                int64_t max_batches)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(sl_text_loader_start(l, pos), 0);
    const sl_text_batch_t *b;
    int rc = 0;
    while ((!max_batches || r->batches < max_batches) &&
           !(rc = sl_text_loader_next(l, &b))) {
        size_t row = (size_t)b->seq_len * sizeof(int32_t);
        for (int i = 0; i < b->n; i++) {
            uint64_t h = XXH3_64bits((char *)b->input_ids + i * row, row);
            h = XXH3_64bits_withSeed((char *)b->labels + i * row, row, h);
            if (b->attention_mask) {
                h = XXH3_64bits_withSeed((char *)b->attention_mask + i * row,
                                         row, h);
                h = XXH3_64bits_withSeed((char *)b->token_type_ids + i * row,
                                         row, h);
            }
            if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 1024;
                r->h = realloc(r->h, (size_t)r->cap * sizeof *r->h);
            }
            r->h[r->n++] = h;
            r->digest = XXH3_64bits_withSeed(&h, sizeof h, r->digest);
        }
        r->batches++;
        sl_text_loader_release(l, b);
    }
    if (!max_batches || r->batches < max_batches)
        assert_int_equal(rc, SL_EEND);
}

static void test_threads_same_stream(void **state)
{
    (void)state;
    rows_t ref = {0};
    for (int t = 1; t <= 4; t *= 2) {
        sl_text_options_t o = lm_opt(t);
        sl_text_loader_t *l = open_one(corpus, &o);
        rows_t r;
        run(l, NULL, &r, 0);
        assert_true(r.n > 100);
        if (t == 1)
            ref = r;
        else {
            assert_int_equal(r.n, ref.n);
            assert_memory_equal(r.h, ref.h, (size_t)r.n * sizeof *r.h);
            free(r.h);
        }
        sl_text_loader_destroy(l);
    }
    /* another seed: another order of the same windows (epoch 0 aside) */
    sl_text_options_t o = lm_opt(2);
    o.seed = 43;
    sl_text_loader_t *l = open_one(corpus, &o);
    rows_t r;
    run(l, NULL, &r, 0);
    assert_true(r.digest != ref.digest);
    free(r.h);
    free(ref.h);
    sl_text_loader_destroy(l);
}

static void test_resume(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    sl_text_loader_t *l = open_one(corpus, &o);
    rows_t full, part, rest;
    run(l, NULL, &full, 0);
    /* stop after 13 batches, read the position, restart a fresh loader */
    run(l, NULL, &part, 13);
    sl_position_t pos;
    sl_text_loader_position(l, &pos);
    assert_int_equal(pos.epoch, 0);
    assert_int_equal(pos.batch, 13);
    sl_text_loader_destroy(l);
    l = open_one(corpus, &o);
    run(l, &pos, &rest, 0);
    assert_int_equal(part.n + rest.n, full.n);
    assert_memory_equal(part.h, full.h, (size_t)part.n * sizeof *part.h);
    assert_memory_equal(rest.h, full.h + part.n,
                        (size_t)rest.n * sizeof *rest.h);
    /* resume in the second epoch too */
    free(rest.h);
    int64_t per_epoch = 0;
    const sl_text_batch_t *b;
    sl_position_t p1 = {1, 2};
    /* a negative position: SL_ERANGE, as the image loader's */
    assert_int_equal(sl_text_loader_start(l, &(sl_position_t){-1, 0}),
                     SL_ERANGE);
    assert_non_null(strstr(sl_text_loader_last_error(l), "epoch -1"));
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    while (!sl_text_loader_next(l, &b)) {
        if (b->epoch == 0)
            per_epoch += b->n;
        sl_text_loader_release(l, b);
    }
    run(l, &p1, &rest, 0); /* epochs 1 and 2: compare epoch 1 */
    int64_t tail = full.n - per_epoch - 2 * o.batch_size;
    assert_true(rest.n > tail);
    assert_memory_equal(rest.h, full.h + per_epoch + 2 * o.batch_size,
                        (size_t)tail * sizeof *rest.h);
    free(full.h);
    free(part.h);
    free(rest.h);
    sl_text_loader_destroy(l);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_ranks_partition(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    o.epochs = 1;
    sl_text_loader_t *l = open_one(corpus, &o);
    rows_t all;
    run(l, NULL, &all, 0);
    sl_text_loader_destroy(l);
    enum { W = 3 };
    rows_t r[W];
    int64_t total = 0;
    uint64_t *u = NULL;
    for (int k = 0; k < W; k++) {
        o.rank = k;
        o.world_size = W;
        l = open_one(corpus, &o);
        run(l, NULL, &r[k], 0);
        sl_text_loader_destroy(l);
        assert_int_equal(r[k].n, r[0].n); /* same count per rank */
        assert_int_equal(r[k].batches, r[0].batches);
        u = realloc(u, (size_t)(total + r[k].n) * sizeof *u);
        memcpy(u + total, r[k].h, (size_t)r[k].n * sizeof *u);
        total += r[k].n;
        free(r[k].h);
    }
    qsort(u, (size_t)total, sizeof *u, cmp_u64);
    qsort(all.h, (size_t)all.n, sizeof *all.h, cmp_u64);
    /* disjoint, and all within world 1's windows; at most W - 1 windows per
     * shuffle group are left out (groups: ceil(chunks / 3)) */
    int64_t j = 0;
    for (int64_t i = 0; i < total; i++) {
        if (i)
            assert_true(u[i] != u[i - 1]);
        while (j < all.n && all.h[j] < u[i])
            j++;
        assert_true(j < all.n && all.h[j] == u[i]);
    }
    assert_true(total <= all.n && all.n - total < (W - 1) * 40);
    free(u);
    free(all.h);
}

/* lm, no shuffle, one chunk: the windows are the stream of documents
 * (tokens + [SEP]) cut into seq_len + 1, in order. */
static void test_lm_windows_exact(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    o.no_shuffle = 1;
    o.chunk_bytes = 1 << 30;
    o.epochs = 1;
    sl__tok_t *tok;
    char err[256];
    assert_int_equal(sl__wordpiece_load(vocab, 1, &tok, err, sizeof err), 0);
    sl__tok_scratch_t *sc = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    FILE *f = fopen(corpus, "r");
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        if (!n)
            continue;
        assert_int_equal(
            sl__tok_encode(tok, line, n, 0, sc, &ids, err, sizeof err), 0);
        sl__ids_push(&ids, SEP);
    }
    fclose(f);
    sl_text_loader_t *l = open_one(corpus, &o);
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *b;
    size_t w = 0, L = (size_t)o.seq_len;
    while (!sl_text_loader_next(l, &b)) {
        for (int i = 0; i < b->n; i++, w++) {
            const int32_t *x = ids.v + w * (L + 1);
            assert_memory_equal(b->input_ids + i * L, x, L * 4);
            assert_memory_equal(b->labels + i * L, x + 1, L * 4);
        }
        sl_text_loader_release(l, b);
    }
    assert_int_equal(w, ids.n / (L + 1));
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(sc);
    sl__tok_free(tok);
    sl_text_loader_destroy(l);
}

static void test_mlm(void **state)
{
    (void)state;
    sl_text_options_t o;
    sl_text_options_init(&o);
    o.task = SL_TEXT_MLM;
    o.vocab = vocab;
    o.seq_len = 64;
    o.batch_size = 16;
    o.chunk_bytes = 2000;
    o.epochs = 3;
    sl_text_loader_t *l = open_one(corpus, &o);
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *b;
    int64_t cand = 0, sel = 0, as_mask = 0, as_same = 0, as_other = 0;
    int L = o.seq_len;
    while (!sl_text_loader_next(l, &b)) {
        for (int i = 0; i < b->n; i++) {
            const int32_t *in = b->input_ids + i * L, *lab = b->labels + i * L;
            const int32_t *att = b->attention_mask + i * L;
            const int32_t *typ = b->token_type_ids + i * L;
            int real = 0, seps = 0;
            while (real < L && att[real])
                real++;
            assert_true(real >= 3);
            assert_int_equal(in[0], CLS);
            assert_int_equal(in[real - 1], SEP);
            assert_int_equal(typ[0], 0);
            for (int k = 0; k < L; k++) {
                assert_int_equal(att[k], k < real);
                if (k >= real) {
                    assert_int_equal(in[k], PAD);
                    assert_int_equal(lab[k], -100);
                    assert_int_equal(typ[k], 0);
                    continue;
                }
                if (in[k] == SEP && lab[k] == -100)
                    seps++;
                if (k == 0 || (in[k] == SEP && lab[k] == -100))
                    continue;
                cand++;
                if (lab[k] == -100)
                    continue;
                sel++;
                assert_true(lab[k] > MASK); /* a letter, never special */
                if (in[k] == MASK)
                    as_mask++;
                else if (in[k] == lab[k])
                    as_same++;
                else
                    as_other++;
            }
            assert_true(seps == 1 || seps == 2);
            /* segment B starts right after the first [SEP] */
            int first_sep = 1;
            while (!(in[first_sep] == SEP && lab[first_sep] == -100))
                first_sep++;
            for (int k = 0; k < real; k++)
                assert_int_equal(typ[k], k <= first_sep ? 0 : 1);
        }
        sl_text_loader_release(l, b);
    }
    sl_text_loader_destroy(l);
    /* binomial bounds, 5 sigma */
    double p = (double)sel / (double)cand;
    assert_true(cand > 20000);
    assert_true(fabs(p - 0.15) < 5 * sqrt(0.15 * 0.85 / (double)cand));
    double fm = (double)as_mask / (double)sel;
    double fs = (double)as_same / (double)sel;
    double fo = (double)as_other / (double)sel;
    double s8 = 5 * sqrt(0.8 * 0.2 / (double)sel);
    double s1 = 5 * sqrt(0.1 * 0.9 / (double)sel);
    /* random tokens equal the original 1/vocab of the time */
    double v = 5 + 2 * NLETTER;
    assert_true(fabs(fm - 0.8) < s8);
    assert_true(fabs(fs - (0.1 + 0.1 / v)) < s1);
    assert_true(fabs(fo - (0.1 - 0.1 / v)) < s1);
}

/* The same documents as text lines, JSON Lines and a zstd shard of records
 * give the same batches (stored sizes are equal, so are the plans). */
static void test_sources_agree(void **state)
{
    (void)state;
    char shard_dir[1024], shard[1100], err[256];
    snprintf(shard_dir, sizeof shard_dir, "%s/shards", dir);
    tu_rmtree(shard_dir);
    assert_int_equal(mkdir(shard_dir, 0777), 0);
    snprintf(shard, sizeof shard, "%s/shard-00000.sls", shard_dir);
    sl__shard_writer_t *w;
    assert_int_equal(
        sl__shard_writer_open(shard, SL_CODEC_ZSTD, &w, err, sizeof err), 0);
    FILE *f = fopen(corpus, "r");
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        char name[32];
        snprintf(name, sizeof name, "doc%d", k++);
        if (n)
            assert_int_equal(
                sl__shard_writer_add(w, line, n, 0, name, err, sizeof err), 0);
    }
    fclose(f);
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    sl_text_options_t o = lm_opt(2);
    rows_t a, b;
    sl_text_loader_t *l = open_one(corpus, &o);
    run(l, NULL, &a, 0);
    sl_text_loader_destroy(l);
    l = open_one(shard_dir, &o);
    assert_int_equal(sl_text_loader_num_documents(l), ndocs);
    run(l, NULL, &b, 0);
    sl_text_loader_destroy(l);
    assert_int_equal(a.digest, b.digest);
    free(b.h);
    /* JSON Lines lines are longer (other chunk cuts): same documents, so
     * with one chunk and no shuffle the same windows */
    o.no_shuffle = 1;
    o.chunk_bytes = 1 << 30;
    l = open_one(corpus, &o);
    free(a.h);
    run(l, NULL, &a, 0);
    sl_text_loader_destroy(l);
    l = open_one(jsonl, &o);
    run(l, NULL, &b, 0);
    assert_int_equal(sl_text_loader_skipped_count(l), 0);
    sl_text_loader_destroy(l);
    assert_int_equal(a.digest, b.digest);
    free(a.h);
    free(b.h);
}

static void test_bad_documents(void **state)
{
    (void)state;
    char bad[1024], txt[1024];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", dir);
    const char *lines = "{\"text\": \"abc def\"}\n"
                        "{\"text\": \"abc\n"              /* 2: invalid */
                        "{\"title\": \"x\"}\n"            /* 3: no text */
                        "{\"text\": 12}\n"                /* 4: number */
                        "[1, 2]\n"                        /* 5: array */
                        "{\"text\": \"bad \xff byte\"}\n" /* 6: UTF-8 */
                        "{\"text\": \"ghi jkl mno\"}\n";
    tu_write_file(bad, lines, strlen(lines));
    snprintf(txt, sizeof txt, "%s/bad.txt", dir);
    const char *t = "good line\nbad \xc3\x28 line\nfine\n";
    tu_write_file(txt, t, strlen(t));
    const char *src[2] = {bad, txt};
    sl_text_options_t o = lm_opt(2);
    o.seq_len = 2;
    o.epochs = 2;
    o.on_error = SL_ON_ERROR_SKIP;
    sl_text_loader_t *l = NULL;
    assert_int_equal(sl_text_loader_create(src, 2, &o, &l), 0);
    assert_int_equal(sl_text_loader_num_documents(l), 10);
    rows_t r;
    run(l, NULL, &r, 0);
    assert_true(r.n > 0);
    free(r.h);
    assert_int_equal(sl_text_loader_skipped_count(l), 6); /* once each */
    const char *want[] = {"bad.jsonl:2: invalid JSON",
                          "bad.jsonl:3: no \"text\" field",
                          "bad.jsonl:4: \"text\" is not a string",
                          "bad.jsonl:5: not a JSON object",
                          "bad.jsonl:6: invalid JSON",
                          "bad.txt:2: invalid UTF-8 at byte 4"};
    for (int i = 0; i < 6; i++) {
        int found = 0;
        for (int j = 0; j < 6; j++)
            found |=
                strstr(sl_text_loader_skipped_message(l, j), want[i]) != NULL;
        if (!found)
            fprintf(stderr, "missing: %s\n", want[i]);
        assert_true(found);
    }
    assert_null(sl_text_loader_skipped_message(l, 6));
    sl_text_loader_destroy(l);
    /* on_error fail: the stream ends with the bad document's message */
    o.on_error = SL_ON_ERROR_FAIL;
    assert_int_equal(sl_text_loader_create(src, 2, &o, &l), 0);
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *b;
    int rc;
    while (!(rc = sl_text_loader_next(l, &b)))
        sl_text_loader_release(l, b);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(sl_text_loader_last_error(l), "bad."));
    sl_text_loader_destroy(l);
    /* a missing file fails create with its name */
    const char *none = "/nonexistent/x.txt";
    assert_int_equal(sl_text_loader_create(&none, 1, &o, &l), SL_ENOTFOUND);
    assert_non_null(strstr(sl_text_loader_last_error(NULL), none));
}

static void test_utf8_check(void **state)
{
    (void)state;
    struct {
        const char *s;
        size_t bad;
    } cases[] = {{"abc", 3},
                 {"a\xc3\xa9", 3},
                 {"\xc0\x80", 0},         /* overlong */
                 {"x\xed\xa0\x80", 1},    /* surrogate */
                 {"\xf4\x90\x80\x80", 0}, /* > U+10FFFF */
                 {"ab\xe2\x82", 2},       /* truncated */
                 {"\xf0\x9f\x98\x80!", 5},
                 {"\x80", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(sl__utf8_valid_prefix((const uint8_t *)cases[i].s,
                                               strlen(cases[i].s)),
                         cases[i].bad);
}

/* The caller's allocator serves the batch arrays (as for image batches:
 * pinned memory); every block comes back at destroy, held ones too. */
typedef struct {
    int allocs, frees;
} count_alloc_t;
static void *count_alloc(size_t n, void *ctx)
{
    ((count_alloc_t *)ctx)->allocs++;
    return aligned_alloc(64, n);
}
static void count_free(void *p, void *ctx)
{
    ((count_alloc_t *)ctx)->frees++;
    free(p);
}

/* Knobs, resolved options, telemetry, the caller's allocator: what the
 * text loader shares with the image loader. The tokenizing threads change
 * while batches flow and the stream stays the same. */
static void test_shared_core(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(1);
    rows_t ref;
    sl_text_loader_t *l = open_one(corpus, &o);
    run(l, NULL, &ref, 0);
    sl_text_loader_destroy(l);

    count_alloc_t ca = {0, 0};
    o.buffer_alloc = count_alloc;
    o.buffer_free = count_free;
    o.buffer_ctx = &ca;
    o.telemetry_ms = 5;
    o.policy = SL_POLICY_STATIC;
    l = open_one(corpus, &o);
    sl_text_options_t r;
    sl_text_options_init(&r);
    assert_int_equal(sl_text_loader_options(l, &r), 0);
    assert_int_equal(r.decode_threads, 1);
    assert_int_equal(r.group_chunks, 3);
    assert_int_equal(r.prefetch_chunks, 6);
    assert_int_equal(r.world_size, 1);
    assert_int_equal(r.on_error, SL_ON_ERROR_FAIL);
    int64_t lo, hi, v;
    assert_int_equal(
        sl_text_loader_param_range(l, SL_PARAM_DECODE_THREADS, &lo, &hi), 0);
    assert_true(lo == 1 && hi >= 2);
    assert_int_equal(sl_text_loader_set(l, SL_PARAM_PREFETCH, 2), SL_EINVAL);
    assert_int_equal(sl_text_loader_set(l, SL_PARAM_DECODE_THREADS, hi + 1),
                     SL_ERANGE);
    assert_non_null(strstr(sl_text_loader_last_error(l), "outside"));

    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *b, *held = NULL;
    rows_t got = {0};
    int k = 0, rc;
    while (!(rc = sl_text_loader_next(l, &b))) {
        if (++k == 3)
            assert_int_equal(sl_text_loader_set(l, SL_PARAM_DECODE_THREADS, 2),
                             0);
        if (k == 9)
            assert_int_equal(sl_text_loader_set(l, SL_PARAM_DECODE_THREADS, 1),
                             0);
        size_t row = (size_t)b->seq_len * sizeof(int32_t);
        for (int i = 0; i < b->n; i++) {
            uint64_t h = XXH3_64bits((char *)b->input_ids + i * row, row);
            h = XXH3_64bits_withSeed((char *)b->labels + i * row, row, h);
            got.digest = XXH3_64bits_withSeed(&h, sizeof h, got.digest);
            got.n++;
        }
        if (k == 1)
            held = b; /* kept to the end: freed by destroy */
        else
            sl_text_loader_release(l, b);
    }
    assert_int_equal(rc, SL_EEND);
    assert_non_null(held);
    assert_int_equal(got.n, ref.n);
    assert_true(got.digest == ref.digest);
    assert_int_equal(sl_text_loader_get(l, SL_PARAM_DECODE_THREADS, &v), 0);
    assert_int_equal(v, 1);
    sl_snapshot_t s;
    sl_snapshot_init(&s);
    /* The collector's next snapshot after the stream ended: polled, not
     * slept for (20 ms was too short on a loaded machine). */
    for (int i = 0; i < 400; i++) {
        assert_int_equal(sl_text_loader_snapshot(l, &s), 0);
        if (s.samples_total > 0)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    assert_true(s.samples_total > 0 && s.samples_total <= ref.n);
    assert_true(s.decode.items_total > 0);
    assert_int_equal(s.read.workers, 0);
    assert_true(ca.allocs >= 2);
    /* none of the caller's blocks freed mid-run (sl__allocator_parks) */
    assert_int_equal(ca.frees, 0);
    sl_text_loader_destroy(l);
    assert_int_equal(ca.frees, ca.allocs);
    free(ref.h);
}

/* A CRLF file (CRLF blank lines included) gives its LF twin's documents
 * and stream: "\r\n" ends a line, the \r is no part of the document. */
static void test_crlf_lines(void **state)
{
    (void)state;
    size_t n;
    uint8_t *lf = tu_read_file(corpus, &n);
    assert_true(n > 1 && lf[n - 1] == '\n');
    /* cut: both without the last \n (the CRLF one ends in a bare \r) */
    for (int cut = 0; cut < 2; cut++) {
        char *crlf = malloc(2 * n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n - (size_t)cut; i++) {
            if (lf[i] == '\n')
                crlf[k++] = '\r';
            crlf[k++] = (char)lf[i];
        }
        if (cut)
            crlf[k++] = '\r';
        char path[1100], lfpath[1100];
        snprintf(path, sizeof path, "%s/crlf%d.txt", dir, cut);
        snprintf(lfpath, sizeof lfpath, "%s/lf%d.txt", dir, cut);
        tu_write_file(path, crlf, k);
        tu_write_file(lfpath, lf, n - (size_t)cut);
        free(crlf);
        sl_text_options_t o = lm_opt(2);
        rows_t a, b;
        sl_text_loader_t *l = open_one(lfpath, &o);
        run(l, NULL, &a, 0);
        /* the same documents, to the byte (their stored sizes) */
        uint64_t fa = sl_text_loader_fingerprint(l);
        sl_text_loader_destroy(l);
        l = open_one(path, &o);
        assert_int_equal(sl_text_loader_num_documents(l), ndocs);
        run(l, NULL, &b, 0);
        assert_true(sl_text_loader_fingerprint(l) == fa);
        sl_text_loader_destroy(l);
        assert_int_equal(a.n, b.n);
        assert_int_equal(a.digest, b.digest);
        free(a.h);
        free(b.h);
    }
    free(lf);
}

/* A caller built against the first layout (options without `given`,
 * stats without tokens_dropped): the same stream, eos_id 0 the default,
 * and nothing written past its stats. */
static void test_first_layout(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    rows_t a, b;
    sl_text_loader_t *l = open_one(corpus, &o);
    run(l, NULL, &a, 0);
    sl_text_loader_destroy(l);
    o.size = offsetof(sl_text_options_t, given);
    o.given = SL_TEXT_GIVEN_EOS_ID; /* past the caller's size: not read */
    l = open_one(corpus, &o);
    run(l, NULL, &b, 0);
    assert_int_equal(a.n, b.n);
    assert_true(a.digest == b.digest);
    unsigned char st[sizeof(sl_text_stats_t) + 8];
    memset(st, 0xAB, sizeof st);
    size_t old = offsetof(sl_text_stats_t, tokens_dropped);
    ((sl_text_stats_t *)(void *)st)->size = old;
    assert_int_equal(sl_text_loader_stats(l, (sl_text_stats_t *)(void *)st), 0);
    for (size_t i = old; i < sizeof st; i++)
        assert_int_equal(st[i], 0xAB);
    assert_true(((sl_text_stats_t *)(void *)st)->sequences > 0);
    sl_text_loader_destroy(l);
    free(a.h);
    free(b.h);
}

/* create's message for o, which must fail with SL_EINVAL. */
static const char *refused(const sl_text_options_t *o)
{
    sl_text_loader_t *l = NULL;
    assert_int_equal(
        sl_text_loader_create((const char *const[]){corpus}, 1, o, &l),
        SL_EINVAL);
    assert_null(l);
    return sl_text_loader_last_error(NULL);
}

/* eos_id is checked against the vocabulary (57 tokens here) and 0 can be
 * meant (SL_TEXT_GIVEN_EOS_ID); a bad option is named with its range;
 * mask_prob 0 given is no masking (HF's mlm_probability=0). */
static void test_option_checks(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    o.eos_id = -5;
    assert_non_null(strstr(refused(&o), "eos_id = -5"));
    o.eos_id = 5 + 2 * NLETTER;
    const char *m = refused(&o);
    assert_non_null(strstr(m, "eos_id = 57"));
    assert_non_null(strstr(m, "57 tokens"));
    o.eos_id = 0; /* default: [SEP] after each document; with the flag: 0 */
    for (int given = 0; given < 2; given++) {
        o.given = given ? SL_TEXT_GIVEN_EOS_ID : 0;
        o.epochs = 1;
        sl_text_loader_t *l = open_one(corpus, &o);
        sl_text_options_t used;
        sl_text_options_init(&used);
        sl_text_loader_options(l, &used);
        assert_int_equal(used.eos_id, given ? PAD : SEP);
        assert_int_equal(sl_text_loader_start(l, NULL), 0);
        const sl_text_batch_t *b;
        int64_t zeros = 0, seps = 0;
        while (!sl_text_loader_next(l, &b)) {
            for (int i = 0; i < b->n * b->seq_len; i++)
                zeros += b->input_ids[i] == PAD, seps += b->input_ids[i] == SEP;
            sl_text_loader_release(l, b);
        }
        sl_text_loader_destroy(l);
        assert_true(given ? zeros > 100 && !seps : seps > 100 && !zeros);
    }
    o = lm_opt(2);
    o.seq_len = 1 << 25;
    assert_non_null(strstr(refused(&o), "seq_len = 33554432: it must be in"));
    o = lm_opt(2);
    o.prefetch_chunks = 2; /* < group_chunks (3) */
    assert_non_null(strstr(refused(&o), "prefetch_chunks = 2"));
    sl_text_options_init(&o);
    o.task = SL_TEXT_MLM;
    o.vocab = vocab;
    o.seq_len = 32;
    o.mask_prob = 1.5;
    assert_non_null(strstr(refused(&o), "mask_prob = 1.5"));
    o.mask_prob = 0;
    o.given = SL_TEXT_GIVEN_MASK_PROB;
    sl_text_loader_t *l = open_one(corpus, &o);
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *b;
    int64_t rows = 0;
    while (!sl_text_loader_next(l, &b)) {
        for (int i = 0; i < b->n * b->seq_len; i++) {
            assert_int_equal(b->labels[i], -100);
            assert_int_not_equal(b->input_ids[i], MASK);
        }
        rows += b->n;
        sl_text_loader_release(l, b);
    }
    sl_text_loader_destroy(l);
    assert_true(rows > 100);
}

/* A vocabulary or merges file that is a FIFO or a folder is refused at
 * once, named with its type, whether the tokenizer reads it or only the
 * fingerprint hashes it (merges beside a WordPiece vocabulary): a FIFO was
 * opened with fopen, which waits for a writer for ever (the alarm turns
 * such a hang into a failure). */
static void test_vocab_not_regular(void **state)
{
    (void)state;
    char fifo[1100], folder[1100];
    snprintf(fifo, sizeof fifo, "%s/vocab.fifo", dir);
    snprintf(folder, sizeof folder, "%s/vocab.d", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkdir(folder, 0700), 0);
    const char *bad[2] = {fifo, folder}, *type[2] = {"(FIFO)", "(directory)"};
    alarm(60);
    for (int i = 0; i < 4; i++) {
        sl_text_options_t o = lm_opt(1);
        if (i < 2)
            o.vocab = bad[i % 2];
        else
            o.merges = bad[i % 2]; /* read by no WordPiece: hashed only */
        sl_text_loader_t *l = NULL;
        int rc =
            sl_text_loader_create((const char *const[]){corpus}, 1, &o, &l);
        assert_int_not_equal(rc, 0);
        assert_null(l);
        const char *m = sl_text_loader_last_error(NULL);
        assert_non_null(strstr(m, bad[i % 2]));
        assert_non_null(strstr(m, "not a regular file"));
        assert_non_null(strstr(m, type[i % 2]));
    }
    alarm(0);
    unlink(fifo);
    rmdir(folder);
}

/* Every token a worker produced is in a window or counted as dropped (the
 * chunks' tails): one epoch, one rank, all of it taken. */
static void test_tokens_dropped(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(2);
    o.epochs = 1;
    sl_text_loader_t *l = open_one(corpus, &o);
    rows_t r;
    run(l, NULL, &r, 0);
    free(r.h);
    sl_text_stats_t st;
    sl_text_stats_init(&st);
    assert_int_equal(sl_text_loader_stats(l, &st), 0);
    sl_text_loader_destroy(l);
    assert_int_equal(st.sequences, r.n);
    assert_true(st.tokens_dropped > 0);
    assert_int_equal(st.tokens_encoded,
                     st.sequences * (o.seq_len + 1) + st.tokens_dropped);
}

/* next with a timeout of 0 gives up whenever a group is not tokenized yet
 * (often mid-batch: the rows taken wait for the next call); the batches
 * are still those of next, and a timed-out call moves no position. An
 * epoch in which every group happened to be ready (the workers ran ahead
 * while this thread was off its core, as once in CI) is read again, up to
 * 20 times, until a call has timed out. */
static void test_next_timeout(void **state)
{
    (void)state;
    sl_text_options_t o = lm_opt(1);
    sl_text_loader_t *l = open_one(corpus, &o);
    rows_t ref;
    run(l, NULL, &ref, 0);
    int64_t late = 0;
    for (int attempt = 0; attempt < 20 && late == 0; attempt++) {
        assert_int_equal(sl_text_loader_start(l, NULL), 0);
        const sl_text_batch_t *b;
        uint64_t digest = 0;
        int64_t rows = 0;
        int rc;
        for (;;) {
            sl_position_t p0, p1;
            sl_text_loader_position(l, &p0);
            rc = sl_text_loader_next_timeout(l, &b, 0);
            if (rc == SL_ETIMEDOUT) {
                assert_null(b);
                sl_text_loader_position(l, &p1);
                assert_int_equal(p0.epoch, p1.epoch);
                assert_int_equal(p0.batch, p1.batch);
                late++;
                continue;
            }
            if (rc)
                break;
            size_t row = (size_t)b->seq_len * sizeof(int32_t);
            for (int i = 0; i < b->n; i++, rows++) {
                uint64_t h = XXH3_64bits((char *)b->input_ids + i * row, row);
                h = XXH3_64bits_withSeed((char *)b->labels + i * row, row, h);
                digest = XXH3_64bits_withSeed(&h, sizeof h, digest);
            }
            sl_text_loader_release(l, b);
        }
        assert_int_equal(rc, SL_EEND);
        assert_int_equal(rows, ref.n);
        assert_int_equal(digest, ref.digest);
    }
    assert_true(late > 0);
    free(ref.h);
    sl_text_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_check),
        cmocka_unit_test(test_threads_same_stream),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_ranks_partition),
        cmocka_unit_test(test_lm_windows_exact),
        cmocka_unit_test(test_mlm),
        cmocka_unit_test(test_sources_agree),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_shared_core),
        cmocka_unit_test(test_crlf_lines),
        cmocka_unit_test(test_first_layout),
        cmocka_unit_test(test_option_checks),
        cmocka_unit_test(test_vocab_not_regular),
        cmocka_unit_test(test_tokens_dropped),
        cmocka_unit_test(test_next_timeout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
