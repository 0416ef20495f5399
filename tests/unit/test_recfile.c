/* WebDataset and TFRecord readers: brace expansion of shard lists, CRC-32C
 * vectors, the tar walker (ustar prefix, GNU long names, pax path/size,
 * base-256 sizes, damage), WebDataset grouping and its bad samples, and
 * TFRecord framing, Example round trip and bad records; the sidecar index
 * (data/recidx): a round trip that gives the reader's name back to the
 * messages, and the reasons a sidecar is refused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/alloc.h"
#include "data/brace.h"
#include "data/crc32c.h"
#include "data/recfile.h"
#include "data/recidx.h"
#include "data/tar_walk.h"
#include "data/tfrecord.h"
#include "sluice/version.h" /* SL_HAVE_TFRECORD */
#include "testutil.h"

static void expect(const char *pat, const char *const *want, int nwant)
{
    char **v, err[256];
    int n;
    assert_int_equal(sl__brace_expand(pat, &v, &n, err, sizeof err), 0);
    assert_int_equal(n, nwant);
    for (int i = 0; i < n; i++)
        assert_string_equal(v[i], want[i]);
    assert_null(v[n]);
    sl__strv_free(v, n);
}

static void test_brace(void **state)
{
    (void)state;
    expect("a-{000..003}.tar",
           (const char *[]){"a-000.tar", "a-001.tar", "a-002.tar", "a-003.tar"},
           4);
    expect("{a,b}-{1..2}", (const char *[]){"a-1", "a-2", "b-1", "b-2"}, 4);
    expect("x{3..1}", (const char *[]){"x3", "x2", "x1"}, 3);
    expect("s{8..10}", (const char *[]){"s8", "s9", "s10"}, 3);
    expect("s{08..10}", (const char *[]){"s08", "s09", "s10"}, 3);
    expect("{-1..1}", (const char *[]){"-1", "0", "1"}, 3);
    expect("{a,b{1..2}}c", (const char *[]){"ac", "b1c", "b2c"}, 3);
    expect("{x}/{a,}", (const char *[]){"{x}/a", "{x}/"}, 2);
    expect("plain.tar", (const char *[]){"plain.tar"}, 1);
    expect("a{b", (const char *[]){"a{b"}, 1);
    expect("{1..2}{a,b}", (const char *[]){"1a", "1b", "2a", "2b"}, 4);
    char **v, err[256];
    int n;
    assert_int_equal(sl__brace_expand("{0..2000000}", &v, &n, err, sizeof err),
                     SL_ERANGE);
    assert_non_null(strstr(err, "more than"));
    assert_int_equal(
        sl__brace_expand("{0..9}{0..9}{0..9}{0..9}{0..9}{0..9}{0..9}", &v, &n,
                         err, sizeof err),
        SL_ERANGE);
    assert_true(sl__brace_has("a{1,2}"));
    assert_false(sl__brace_has("a.tar"));
}

static void test_crc32c(void **state)
{
    (void)state;
    /* RFC 3720 B.4 and the common check value. */
    assert_int_equal(sl__crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t b[64];
    memset(b, 0, 32);
    assert_int_equal(sl__crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, 32);
    assert_int_equal(sl__crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    assert_int_equal(sl__crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    assert_int_equal(sl__crc32c(0, b, 32), 0x113FDB5Cu);
    /* Continuation and any alignment give the same value. */
    for (int i = 0; i < 64; i++)
        b[i] = (uint8_t)(i * 37 + 11);
    uint32_t whole = sl__crc32c(0, b, 64);
    for (int cut = 0; cut <= 64; cut++)
        assert_int_equal(sl__crc32c(sl__crc32c(0, b, (size_t)cut), b + cut,
                                    (size_t)(64 - cut)),
                         whole);
    uint8_t *u = malloc(80);
    memcpy(u + 3, b, 64);
    assert_int_equal(sl__crc32c(0, u + 3, 64), whole);
    free(u);
    /* An empty record's framing, as TensorFlow writes it. */
    uint8_t h[12], f[4];
    sl__tfrecord_head(h, 0);
    sl__tfrecord_foot(f, "", 0);
    assert_memory_equal(h, "\0\0\0\0\0\0\0\0\x29\x03\x98\x07", 12);
    assert_memory_equal(f, "\xd8\xea\x82\xa2", 4);
    /* TFRecord's mask (rotate right 15, add 0xa282ead8). */
    assert_int_equal(sl__crc32c_mask(0), 0xa282ead8u);
    assert_int_equal(sl__crc32c_mask(0x12345678u),
                     ((0x12345678u >> 15) | (0x12345678u << 17)) + 0xa282ead8u);
}

/* ------------------------------------------------------------ tar files */

typedef struct tarbuf {
    uint8_t *p;
    size_t n;
} tarbuf_t;

static void tb_put(tarbuf_t *t, const void *p, size_t n)
{
    t->p = realloc(t->p, t->n + n + 512);
    memcpy(t->p + t->n, p, n);
    t->n += n;
    size_t pad = (512 - n % 512) % 512;
    memset(t->p + t->n, 0, pad);
    t->n += pad;
}

/* A header; magic 0: v7, 1: POSIX ustar, 2: GNU. size < 0: base-256 of
 * -size. */
static void tb_header(tarbuf_t *t, const char *name, const char *prefix,
                      long long size, char type, int magic)
{
    uint8_t h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    if (size >= 0) {
        snprintf((char *)h + 124, 12, "%011llo", size & 077777777777LL);
    } else {
        h[124] = 0x80;
        unsigned long long v = (unsigned long long)-size;
        for (int k = 11; k >= 1; k--, v >>= 8)
            h[124 + k] = (uint8_t)v;
    }
    h[156] = (uint8_t)type;
    if (magic == 1) {
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        if (prefix)
            snprintf((char *)h + 345, 155, "%s", prefix);
    } else if (magic == 2) {
        memcpy(h + 257, "ustar  ", 8);
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int k = 0; k < 512; k++)
        sum += h[k];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tb_put(t, h, 512);
}

static void tb_file(tarbuf_t *t, const char *name, const void *p, size_t n)
{
    tb_header(t, name, NULL, (long long)n, '0', 1);
    tb_put(t, p, n);
}

static void tb_end(tarbuf_t *t)
{
    uint8_t z[1024] = {0};
    tb_put(t, z, sizeof z);
}

typedef struct seen {
    int n;
    char names[8][SL__TAR_NAME_MAX + 1];
    uint64_t data[8], size[8];
} seen_t;

static int collect(void *ctx, const sl__tar_member_t *m, char *err,
                   size_t errlen)
{
    (void)err;
    (void)errlen;
    seen_t *s = ctx;
    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", m->name);
        s->data[s->n] = m->data;
        s->size[s->n] = m->size;
    }
    s->n++;
    return 0;
}

static int walk_mem(const tarbuf_t *t, seen_t *s, char *err, size_t errlen)
{
    sl__bytesrc_t *src;
    assert_int_equal(
        sl__bytesrc_open_mem(t->p, t->n, "t.tar", &src, err, errlen), 0);
    memset(s, 0, sizeof *s);
    int rc = sl__tar_walk(src, 0, collect, s, NULL, err, errlen);
    sl__bytesrc_close(src);
    return rc;
}

static void test_tar_walk(void **state)
{
    (void)state;
    tarbuf_t t = {0};
    char longname[300], err[512];
    memset(longname, 'n', sizeof longname);
    memcpy(longname + 290, ".jpg", 5);
    /* ustar with a prefix */
    tb_header(&t, "a.jpg", "some/dir", 3, '0', 1);
    tb_put(&t, "abc", 3);
    /* a directory, skipped */
    tb_header(&t, "d/", NULL, 0, '5', 1);
    /* GNU long name */
    tb_header(&t, "././@LongLink", NULL, (long long)strlen(longname) + 1, 'L',
              2);
    tb_put(&t, longname, strlen(longname) + 1);
    tb_header(&t, "truncated-name", NULL, 2, '0', 2);
    tb_put(&t, "xy", 2);
    /* pax path and size (the header's size field says 0) */
    char pax[600];
    int plen = snprintf(pax, sizeof pax, "%d path=p/%s\n", 0, longname);
    int total = plen;
    for (;;) { /* the record's length counts its own digits */
        int again =
            snprintf(pax, sizeof pax, "%d path=p/%s\n", total, longname);
        if (again == total)
            break;
        total = again;
    }
    const char *sz = "10 size=4\n";
    strcat(pax, sz);
    tb_header(&t, "PaxHeaders/x", NULL, (long long)strlen(pax), 'x', 1);
    tb_put(&t, pax, strlen(pax));
    tb_header(&t, "short", NULL, 0, '0', 1);
    tb_put(&t, "wxyz", 4);
    /* v7 header, base-256 size */
    tb_header(&t, "v7.cls", NULL, -5, 0, 0);
    tb_put(&t, "12345", 5);
    tb_end(&t);

    seen_t s;
    int wrc = walk_mem(&t, &s, err, sizeof err);
    if (wrc)
        print_error("%s\n", err);
    assert_int_equal(wrc, 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.names[0], "some/dir/a.jpg");
    assert_int_equal(s.size[0], 3);
    assert_memory_equal(t.p + s.data[0], "abc", 3);
    assert_string_equal(s.names[1], longname);
    assert_memory_equal(t.p + s.data[1], "xy", 2);
    assert_int_equal(strncmp(s.names[2], "p/", 2), 0);
    assert_string_equal(s.names[2] + 2, longname);
    assert_int_equal(s.size[2], 4);
    assert_memory_equal(t.p + s.data[2], "wxyz", 4);
    assert_string_equal(s.names[3], "v7.cls");
    assert_int_equal(s.size[3], 5);

    /* No end blocks at all: the end of the file ends it. */
    tarbuf_t u = {malloc(t.n), t.n - 1024};
    memcpy(u.p, t.p, u.n);
    assert_int_equal(walk_mem(&u, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 4);
    /* Cut inside the last member's data: truncated, named with offset. */
    u.n = t.n - 1024 - 512 + 2;
    assert_int_equal(walk_mem(&u, &s, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "t.tar: tar header at offset"));
    assert_non_null(strstr(err, "truncated"));
    /* Cut inside a header. */
    u.n = 1024 + 100;
    assert_int_equal(walk_mem(&u, &s, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "truncated"));
    /* A flipped byte in the first header: bad checksum at offset 0. */
    memcpy(u.p, t.p, t.n);
    u.n = t.n;
    u.p[10] ^= 1;
    assert_int_equal(walk_mem(&u, &s, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "offset 0: bad header checksum"));
    assert_int_equal(s.n, 0);
    free(u.p);
    free(t.p);

    /* A member claiming more bytes than the file has. */
    tarbuf_t big = {0};
    tb_header(&big, "huge.jpg", NULL, -(1LL << 40), '0', 1);
    tb_end(&big);
    assert_int_equal(walk_mem(&big, &s, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "member of 1099511627776 bytes"));
    free(big.p);
}

/* --------------------------------------------------------- WebDataset */

static sl__recfile_t *open_mem(const void *p, size_t n, const char *name,
                               int fmt, int skip, int *rc, char *err,
                               size_t errlen)
{
    sl__bytesrc_t *src;
    assert_int_equal(sl__bytesrc_open_mem(p, n, name, &src, err, errlen), 0);
    sl__recfile_t *f = NULL;
    *rc = sl__recfile_open_src(src, fmt, skip, &f, err, errlen);
    return f;
}

static void test_wds(void **state)
{
    (void)state;
    tarbuf_t t = {0};
    tb_file(&t, "x/a.jpg", "AAAA", 4);
    tb_file(&t, "x/a.cls", "7\n", 2);
    tb_file(&t, "x/a.json", "{}", 2);
    tb_file(&t, "__meta__.txt", "m", 1); /* webdataset's meta member */
    tb_file(&t, "x/b.seg.png", "S", 1);  /* suffix seg.png: ignored */
    tb_file(&t, "x/b.PNG", "BBBBBB", 6);
    tb_file(&t, "x/b.cls", "0", 1);
    tb_file(&t, "x/c.jpg", "C", 1); /* no label */
    tb_file(&t, "x/d.jpeg", "D", 1);
    tb_file(&t, "x/d.cls", "seven", 5); /* not a number */
    tb_file(&t, "x/e.cls", "1", 1);     /* no image */
    tb_file(&t, "README", "r", 1);      /* no dot: skipped */
    tb_file(&t, "x/f.jpg", "FF", 2);
    tb_file(&t, "x/f.cls", " -3 ", 4); /* out of range */
    tb_file(&t, "x/g.jpg", "G1", 2);
    tb_file(&t, "x/g.png", "G2", 2); /* two images */
    tb_file(&t, "x/g.cls", "1", 1);
    tb_file(&t, "x/h.jpg", "HHH", 3);
    tb_file(&t, "x/h.cls", "2", 1);
    tb_end(&t);
    char err[1024];
    int rc;
    sl__recfile_t *f =
        open_mem(t.p, t.n, "s.tar", SL__FMT_WDS, 0, &rc, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_null(f);
    assert_string_equal(err, "s.tar: sample 2 (key x/c): no .cls label member");

    f = open_mem(t.p, t.n, "s.tar", SL__FMT_WDS, 1, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 8);
    assert_int_equal(f->nbad, 5);
    const int C = SL_ECORRUPT;
    int want_label[8] = {7, 0, C, C, C, C, C, 2};
    for (int k = 0; k < 8; k++)
        assert_int_equal(f->recs[k].label, want_label[k]);
    assert_string_equal(sl__recfile_bad(f, 3),
                        "s.tar: sample 3 (key x/d): .cls is not an integer: "
                        "\"seven\"");
    assert_non_null(strstr(sl__recfile_bad(f, 4), "key x/e): no image member"));
    assert_non_null(strstr(sl__recfile_bad(f, 5), "label -3 out of range"));
    assert_non_null(strstr(sl__recfile_bad(f, 6), "more than one image"));
    sl__bytes_t out = {0};
    uint64_t stored;
    assert_int_equal(
        sl__recfile_read(f, 1, &out, NULL, &stored, err, sizeof err), 0);
    assert_int_equal(out.n, 6);
    assert_memory_equal(out.p, "BBBBBB", 6);
    assert_int_equal(stored, 6);
    assert_int_equal(
        sl__recfile_read(f, 7, &out, NULL, &stored, err, sizeof err), 0);
    assert_memory_equal(out.p, "HHH", 3);
    assert_int_equal(
        sl__recfile_read(f, 3, &out, NULL, &stored, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "key x/d"));
    char d[512];
    assert_string_equal(sl__recfile_describe(f, 7, d, sizeof d),
                        "s.tar: sample 7 (key x/h)");
    sl__recfile_close(f);

    /* Damage after sample 0: kept under skip, the damage noted. */
    size_t cut = 512 * 5 + 1; /* inside a.json's data */
    f = open_mem(t.p, cut, "s.tar", SL__FMT_WDS, 1, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 0); /* sample a lost a member: it goes too */
    assert_non_null(f->damage);
    assert_non_null(strstr(f->damage, "truncated"));
    sl__recfile_close(f);
    /* Inside a.json's header: whose member it was is not known (its
     * bytes cannot be trusted), and a's members in the file are whole. */
    f = open_mem(t.p, 512 * 4 + 10, "s.tar", SL__FMT_WDS, 1, &rc, err,
                 sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 1);
    assert_int_equal(f->recs[0].label, 7);
    assert_non_null(f->damage);
    sl__recfile_close(f);
    cut = 512 * 8; /* after a.json: sample a is complete */
    f = open_mem(t.p, cut + 100, "s.tar", SL__FMT_WDS, 1, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 1);
    assert_int_equal(f->nbad, 0);
    assert_non_null(f->damage);
    sl__recfile_close(f);
    sl__bytes_free(&out);
    free(t.p);
}

/* ------------------------------------------------------- sidecar index */

/* A recfile over p[0..n) named name, filled from sidecar bytes. */
static sl__recfile_t *decoded(const void *p, size_t n, const char *name,
                              int fmt, const sl__bytes_t *side, int *rc,
                              char *err, size_t errlen)
{
    sl__recfile_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sl__bytesrc_open_mem(p, n, name, &f->src, err, errlen), 0);
    f->fmt = fmt;
    *rc = sl__recidx_decode(f, side->p, side->n, err, errlen);
    return f;
}

static void test_recidx(void **state)
{
    (void)state;
    tarbuf_t t = {0};
    tb_file(&t, "x/a.jpg", "AAAA", 4);
    tb_file(&t, "x/a.cls", "7", 1);
    tb_file(&t, "x/c.jpg", "C", 1); /* no label */
    tb_file(&t, "x/h.jpg", "HHH", 3);
    tb_file(&t, "x/h.cls", "2", 1);
    tb_file(&t, "x/i.jpg", "I", 1);
    size_t cut = t.n + 512; /* inside i.cls (none of its data): damage */
    tb_file(&t, "x/i.cls", "1", 1);
    tb_end(&t);
    char err[1024];
    int rc;
    sl__recfile_t *w =
        open_mem(t.p, cut, "s.tar", SL__FMT_WDS, 1, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(w->n, 3);
    assert_int_equal(w->nbad, 1);
    assert_non_null(w->damage);
    sl__bytes_t side = {0};
    assert_int_equal(sl__recidx_encode(w, &side), 0);
    /* Read back under another name (a URL): the same samples, the
     * messages naming the reader's file. */
    sl__recfile_t *f = decoded(t.p, cut, "http://h/s.tar", SL__FMT_WDS, &side,
                               &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, w->n);
    assert_memory_equal(f->recs, w->recs, (size_t)w->n * sizeof *w->recs);
    assert_int_equal(f->nbad, 1);
    assert_int_equal(f->bad_idx[0], 1);
    assert_string_equal(sl__recfile_bad(f, 1),
                        "http://h/s.tar: sample 1 (key x/c): no .cls label "
                        "member");
    assert_string_equal(f->damage + strlen("http://h/"), w->damage);
    sl__bytes_t out = {0};
    assert_int_equal(sl__recfile_read(f, 2, &out, NULL, NULL, err, sizeof err),
                     0);
    assert_memory_equal(out.p, "HHH", 3);
    char d[512];
    assert_string_equal(sl__recfile_describe(f, 2, d, sizeof d),
                        "http://h/s.tar: sample 2 (key x/h)");
    sl__bytes_t again = {0};
    assert_int_equal(sl__recidx_encode(f, &again), 0);
    assert_int_equal(again.n, side.n);
    assert_memory_equal(again.p, side.p, side.n);
    sl__recfile_close(f);
    sl__bytes_free(&again);

    /* Refused: each with its reason, leaving no samples behind. */
    f = decoded(t.p, cut + 512, "s.tar", SL__FMT_WDS, &side, &rc, err,
                sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_int_equal(f->n, 0);
    char want[128];
    snprintf(want, sizeof want,
             "stale: made for a file of %zu bytes, this one has %zu", cut,
             cut + 512);
    assert_string_equal(err, want);
    sl__recfile_close(f);
    f = decoded(t.p, cut, "s.tar", SL__FMT_TFRECORD, &side, &rc, err,
                sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_string_equal(err, "an index of the other format");
    sl__recfile_close(f);
    side.p[60] ^= 1;
    f = decoded(t.p, cut, "s.tar", SL__FMT_WDS, &side, &rc, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_string_equal(err, "checksum mismatch");
    sl__recfile_close(f);
    side.p[60] ^= 1;
    /* A sample past the end of the file, with a good checksum. */
    sl__put_u32(side.p + 48 + 16, 1u << 20);
    sl__put_u64(side.p + side.n - 8, XXH3_64bits(side.p, side.n - 8));
    f = decoded(t.p, cut, "s.tar", SL__FMT_WDS, &side, &rc, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_string_equal(err, "sample 0: a sample past the end of the file");
    assert_int_equal(f->n, 0);
    assert_null(f->recs);
    sl__recfile_close(f);
    side.n = 20;
    f = decoded(t.p, cut, "s.tar", SL__FMT_WDS, &side, &rc, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_string_equal(err, "not a sluice index");
    sl__recfile_close(f);
    sl__recfile_close(w);
    sl__bytes_free(&side);
    sl__bytes_free(&out);
    free(t.p);
}

/* A tar rewritten with the same size, its sidecar made for the old one:
 * the sizes agree, so the sidecar is used; each sample is read with the
 * tar header before its image, and where that is not the header of an
 * image of the indexed size the read fails naming the sample and why —
 * never the wrong bytes. The unchanged file reads as before. */
static void test_recidx_same_size_rewrite(void **state)
{
    (void)state;
    tarbuf_t a = {0}, b = {0};
    tb_file(&a, "x/a.jpg", "AAAAAAAA", 8); /* 8 + 3 bytes */
    tb_file(&a, "x/a.cls", "1", 1);
    tb_file(&a, "x/b.jpg", "BBB", 3);
    tb_file(&a, "x/b.cls", "2", 1);
    tb_end(&a);
    /* the same members, the samples in the other order: same size */
    tb_file(&b, "x/b.jpg", "BBB", 3);
    tb_file(&b, "x/b.cls", "2", 1);
    tb_file(&b, "x/a.jpg", "AAAAAAAA", 8);
    tb_file(&b, "x/a.cls", "1", 1);
    tb_end(&b);
    assert_int_equal(a.n, b.n);
    char err[1024];
    int rc;
    sl__recfile_t *w =
        open_mem(a.p, a.n, "s.tar", SL__FMT_WDS, 0, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    sl__bytes_t side = {0};
    assert_int_equal(sl__recidx_encode(w, &side), 0);
    sl__bytes_t out = {0};
    uint64_t stored = 0;
    /* the file it was made for */
    sl__recfile_t *f = decoded(a.p, a.n, "http://h/s.tar", SL__FMT_WDS, &side,
                               &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    f->from_sidecar = 1;
    assert_int_equal(
        sl__recfile_read(f, 0, &out, NULL, &stored, err, sizeof err), 0);
    assert_int_equal(out.n, 8);
    assert_memory_equal(out.p, "AAAAAAAA", 8);
    assert_int_equal(stored, 8 + 512); /* its header came too */
    sl__recfile_close(f);
    /* the rewritten one */
    f = decoded(b.p, b.n, "http://h/s.tar", SL__FMT_WDS, &side, &rc, err,
                sizeof err);
    assert_int_equal(rc, 0);
    f->from_sidecar = 1;
    assert_int_equal(sl__recfile_read(f, 0, &out, NULL, NULL, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "http://h/s.tar: sample 0"));
    assert_non_null(strstr(err, "no tar header of its 8-byte image"));
    assert_non_null(strstr(err, "the file changed since it was indexed"));
    assert_int_equal(sl__recfile_read(f, 1, &out, NULL, NULL, err, sizeof err),
                     SL_ECORRUPT);
    sl__recfile_close(f);
    sl__recfile_close(w);
    sl__bytes_free(&side);
    sl__bytes_free(&out);
    free(a.p);
    free(b.p);
}

/* ------------------------------------------------------------ TFRecord */

static void add_record(tarbuf_t *t, const void *p, size_t n)
{
    uint8_t h[12], f[4];
    sl__tfrecord_head(h, n);
    sl__tfrecord_foot(f, p, n);
    t->p = realloc(t->p, t->n + n + 16);
    memcpy(t->p + t->n, h, 12);
    memcpy(t->p + t->n + 12, p, n);
    memcpy(t->p + t->n + 12 + n, f, 4);
    t->n += n + 16;
}

/* A protobuf varint at v; returns its length. */
static size_t pb_varint(uint8_t *v, uint64_t x)
{
    size_t k = 0;
    for (; x > 0x7f; x >>= 7)
        v[k++] = (uint8_t)(x & 0x7f) | 0x80;
    v[k++] = (uint8_t)x;
    return k;
}

/* A protobuf length-delimited field: key, length, bytes. */
static void pb_field(sl__bytes_t *b, int num, const void *p, size_t n)
{
    uint8_t v[20];
    size_t k = pb_varint(v, (uint64_t)num << 3 | 2);
    k += pb_varint(v + k, n);
    assert_int_equal(sl__bytes_reserve(b, b->n + k + n), 0);
    memcpy(b->p + b->n, v, k);
    memcpy(b->p + b->n + k, p, n);
    b->n += k + n;
}

/* A feature entry {key, Feature} of an Example's Features map: a
 * bytes_list (1) of one value, or an int64_list (3) of one varint. */
static void pb_entry(sl__bytes_t *b, const char *key, int kind, const void *p,
                     size_t n)
{
    sl__bytes_t l = {0}, f = {0}, e = {0};
    pb_field(&l, 1, p, n); /* BytesList.value, or Int64List's packed */
    pb_field(&f, kind, l.p, l.n);
    pb_field(&e, 1, key, strlen(key));
    pb_field(&e, 2, f.p, f.n);
    pb_field(b, 1, e.p, e.n);
    sl__bytes_free(&l), sl__bytes_free(&f), sl__bytes_free(&e);
}

/* The image of an Example is found by its place in the wire format, in
 * time linear in the record: a decoy field of L - 1 bytes of the image and
 * one other byte before it made the search of the whole record for the
 * image (a prefix match at every byte of the decoy, each checked whole)
 * take ~L^2/2 compares (25 s of CPU at L = 1 MiB). At L = 8 MiB that is
 * over an hour, past this test's timeout; it now takes milliseconds. */
static void test_tfexample_decoy(void **state)
{
    (void)state;
    if (!SL_HAVE_TFRECORD)
        skip();
    size_t L = (size_t)8 << 20;
    uint8_t *img = malloc(L);
    assert_non_null(img);
    memset(img, 'A', L);
    sl__bytes_t feats = {0}, ex = {0};
    img[L - 1] = 'B';
    pb_entry(&feats, "decoy", 1, img, L);
    img[L - 1] = 'A';
    pb_entry(&feats, "image/encoded", 1, img, L);
    pb_entry(&feats, "image/class/label", 3, "\x07", 1);
    pb_field(&ex, 1, feats.p, feats.n);
    const uint8_t *at;
    size_t len;
    int64_t label;
    char why[256];
    assert_int_equal(
        sl__tfexample_parse(ex.p, ex.n, &at, &len, &label, why, sizeof why), 0);
    assert_int_equal(len, L);
    assert_int_equal(label, 7);
    assert_memory_equal(at, img, L);
    assert_true(at > ex.p + L); /* past the decoy */
    sl__bytes_free(&feats), sl__bytes_free(&ex);
    free(img);
}

static void test_tfrecord(void **state)
{
    (void)state;
    if (!SL_HAVE_TFRECORD) { /* -DSL_TFRECORD=OFF: refused, clearly */
        uint8_t h[16];
        sl__tfrecord_head(h, 0);
        sl__tfrecord_foot(h + 12, h, 0);
        char err[512];
        int rc;
        sl__recfile_t *f = open_mem(h, sizeof h, "x.tfrecord", SL__FMT_TFRECORD,
                                    0, &rc, err, sizeof err);
        assert_null(f);
        assert_int_equal(rc, SL_EUNSUPPORTED);
        assert_non_null(strstr(err, "built without TFRecord support"));
        skip();
    }
    tarbuf_t t = {0};
    sl__bytes_t ex = {0};
    const char *imgs[3] = {"first image", "second", "third one"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl__tfexample_build(imgs[i], strlen(imgs[i]), 10 + i,
                                             i == 1 ? NULL : "jpeg", &ex),
                         0);
        const uint8_t *img;
        size_t len;
        int64_t label;
        char why[256];
        assert_int_equal(sl__tfexample_parse(ex.p, ex.n, &img, &len, &label,
                                             why, sizeof why),
                         0);
        assert_int_equal(len, strlen(imgs[i]));
        assert_memory_equal(img, imgs[i], len);
        assert_int_equal(label, 10 + i);
        add_record(&t, ex.p, ex.n);
    }
    add_record(&t, "\x0a\x00", 2); /* an Example without features */
    char err[1024];
    int rc;
    sl__recfile_t *f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 0,
                                &rc, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, "d.tfrecord: record 3 at offset"));
    assert_non_null(strstr(err, "image/encoded"));
    f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 1, &rc, err,
                 sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 4);
    sl__bytes_t out = {0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            sl__recfile_read(f, i, &out, NULL, NULL, err, sizeof err), 0);
        assert_int_equal(out.n, strlen(imgs[i]));
        assert_memory_equal(out.p, imgs[i], out.n);
        assert_int_equal(f->recs[i].label, 10 + i);
    }
    sl__recfile_close(f);

    /* A flipped data byte: that record's CRC fails (strict: the open; skip:
     * its read); the framing holds, so the next records stay. */
    size_t rec1 = 12 + (size_t)sl__get_u64(t.p) + 4;
    t.p[rec1 + 12 + 3] ^= 0x20;
    f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 0, &rc, err,
                 sizeof err);
    assert_int_equal(rc, SL_ECHECKSUM);
    assert_non_null(strstr(err, "record 1 at offset"));
    assert_non_null(strstr(err, "data CRC mismatch"));
    f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 1, &rc, err,
                 sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 4);
    assert_int_equal(sl__recfile_read(f, 1, &out, NULL, NULL, err, sizeof err),
                     SL_ECHECKSUM);
    assert_int_equal(sl__recfile_read(f, 2, &out, NULL, NULL, err, sizeof err),
                     0);
    sl__recfile_close(f);
    t.p[rec1 + 12 + 3] ^= 0x20;

    /* A bad length CRC ends the framing: damage after record 0. */
    t.p[rec1] ^= 1;
    f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 0, &rc, err,
                 sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, "record 1 at offset"));
    assert_non_null(strstr(err, "length CRC mismatch"));
    f = open_mem(t.p, t.n, "d.tfrecord", SL__FMT_TFRECORD, 1, &rc, err,
                 sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 1);
    assert_non_null(f->damage);
    sl__recfile_close(f);
    t.p[rec1] ^= 1;

    /* An honest-looking huge length (its CRC right): truncated, nothing
     * allocated for it. */
    uint8_t h[12 + 4];
    sl__tfrecord_head(h, 1ULL << 50);
    tarbuf_t big = {malloc(sizeof h), sizeof h};
    memcpy(big.p, h, sizeof h);
    f = open_mem(big.p, big.n, "big.tfrecord", SL__FMT_TFRECORD, 0, &rc, err,
                 sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, "big.tfrecord: record 0 at offset 0: "
                                "truncated (length 1125899906842624"));
    /* Truncated last record. */
    f = open_mem(t.p, t.n - 3, "d.tfrecord", SL__FMT_TFRECORD, 0, &rc, err,
                 sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, "record 3"));
    free(big.p);
    sl__bytes_free(&out);
    sl__bytes_free(&ex);
    free(t.p);
}

/* Reader threads share one opened file (the loader's read stage): each
 * reads every sample, in its own order, into its own buffer, and gets the
 * bytes written. Run under TSan by `make check` (label concurrency). */
typedef struct reader {
    const sl__recfile_t *f;
    int id, errors;
} reader_t;

static void *read_all(void *arg)
{
    reader_t *r = arg;
    sl__bytes_t out = {0};
    char err[512], want[32];
    for (int round = 0; round < 20; round++)
        for (int64_t j = 0; j < r->f->n; j++) {
            int64_t k = (j * 7 + r->id) % r->f->n;
            int n = snprintf(want, sizeof want, "image %lld", (long long)k);
            if (sl__recfile_read(r->f, k, &out, NULL, NULL, err, sizeof err) ||
                out.n != (size_t)n || memcmp(out.p, want, (size_t)n))
                r->errors++;
        }
    sl__bytes_free(&out);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("recfile-threads");
    char path[4096], err[512];
    tarbuf_t t = {0};
    for (int k = 0; k < 50; k++) {
        char name[32], img[32], cls[8];
        int n = snprintf(img, sizeof img, "image %d", k);
        snprintf(name, sizeof name, "%04d.jpg", k);
        tb_file(&t, name, img, (size_t)n);
        snprintf(name, sizeof name, "%04d.cls", k);
        n = snprintf(cls, sizeof cls, "%d", k % 5);
        tb_file(&t, name, cls, (size_t)n);
    }
    tb_end(&t);
    snprintf(path, sizeof path, "%s/s.tar", dir);
    assert_int_equal(tu_write_file(path, t.p, t.n), 0);
    sl__recfile_t *f;
    assert_int_equal(
        sl__recfile_open(path, SL__FMT_WDS, 0, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 50);
    pthread_t th[4];
    reader_t r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (reader_t){f, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, read_all, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].errors, 0);
    }
    sl__recfile_close(f);
    free(t.p);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brace),
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_tar_walk),
        cmocka_unit_test(test_wds),
        cmocka_unit_test(test_tfrecord),
        cmocka_unit_test(test_tfexample_decoy),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_recidx),
        cmocka_unit_test(test_recidx_same_size_rewrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
