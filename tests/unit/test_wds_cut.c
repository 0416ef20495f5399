/* A WebDataset tar cut short, at every byte offset of a small one: the
 * samples whose members the file still holds whole are delivered (webdataset
 * groups by key, so a sample ends where the next key starts), the damage
 * noted as the rest of the file lost. The sample being gathered when the
 * walk meets the cut goes with the rest only when the member lost is known
 * to be its own (named by a sound header, or a GNU long name before it);
 * where the cut header names nothing it stays, a bad sample when the lost
 * member was its label, as a cut exactly at that header makes it. Before,
 * it always went: a tar cut inside member 005.jpg lost sample 004 with its
 * .jpg and .cls whole. The sidecar index (data/recidx) of such a cut holds
 * the same samples and damage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/recfile.h"
#include "data/recidx.h"
#include "data/tar_walk.h"
#include "testutil.h"

#define NSAMPLES 6
#define MAXMEM 32

typedef struct mem {
    uint64_t first; /* its first header: the GNU long name's, or its own */
    uint64_t hdr;   /* its own header */
    uint64_t end;   /* the end of its data */
    int has_long;
    uint64_t long_end; /* the end of its long name's data */
    int sample;        /* -1: the end-of-archive blocks */
    char kind;         /* 'j' image, 'c' label, 'o' another member */
} mem_t;

typedef struct tar {
    uint8_t *p;
    size_t n;
    mem_t m[MAXMEM];
    int nm;
} tar_t;

static void put(tar_t *t, const void *p, size_t n)
{
    size_t pad = (512 - n % 512) % 512;
    t->p = realloc(t->p, t->n + n + pad);
    assert_non_null(t->p);
    memcpy(t->p + t->n, p, n);
    memset(t->p + t->n + n, 0, pad);
    t->n += n + pad;
}

/* A ustar header ('0' regular, 'L' GNU long name). */
static void header(tar_t *t, const char *name, size_t size, char type)
{
    uint8_t h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    snprintf((char *)h + 124, 12, "%011zo", size);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int k = 0; k < 512; k++)
        sum += h[k];
    snprintf((char *)h + 148, 8, "%06o", sum);
    put(t, h, 512);
}

/* A member of sample s; a name over 99 bytes goes in a GNU long name. */
static void member(tar_t *t, int s, char kind, const char *name,
                   const void *data, size_t n)
{
    mem_t *m = &t->m[t->nm++];
    m->first = t->n;
    m->has_long = strlen(name) > 99;
    if (m->has_long) {
        header(t, "././@LongLink", strlen(name) + 1, 'L');
        put(t, name, strlen(name) + 1);
        m->long_end = m->first + 512 + strlen(name) + 1;
    }
    m->hdr = t->n;
    header(t, m->has_long ? "cut-name" : name, n, '0');
    m->end = t->n + n;
    put(t, data, n);
    m->sample = s;
    m->kind = kind;
}

/* Samples 0..5, each an image and a label; sample 2 has a third member
 * after its label, sample 3 a key too long for the header (GNU long
 * names), sample 4 its label first. */
static void make(tar_t *t)
{
    memset(t, 0, sizeof *t);
    char img[900], key[160], name[200], cls[8];
    memset(img, 'J', sizeof img);
    for (int s = 0; s < NSAMPLES; s++) {
        if (s == 3) {
            char dir[121];
            memset(dir, 'd', 120);
            dir[120] = 0;
            snprintf(key, sizeof key, "long/%s/%d", dir, s);
        } else {
            snprintf(key, sizeof key, "x/%03d", s);
        }
        int ncls = snprintf(cls, sizeof cls, "%d", s % 4);
        size_t nimg = 500 + (size_t)s * 77;
        if (s == 4) {
            snprintf(name, sizeof name, "%s.cls", key);
            member(t, s, 'c', name, cls, (size_t)ncls);
        }
        snprintf(name, sizeof name, "%s.jpg", key);
        member(t, s, 'j', name, img, nimg);
        if (s != 4) {
            snprintf(name, sizeof name, "%s.cls", key);
            member(t, s, 'c', name, cls, (size_t)ncls);
        }
        if (s == 2) {
            snprintf(name, sizeof name, "%s.json", key);
            member(t, s, 'o', name, "{}", 2);
        }
    }
    /* the end-of-archive blocks: the first is read as a header */
    mem_t *e = &t->m[t->nm++];
    e->first = e->hdr = t->n;
    e->end = t->n + 512;
    e->sample = -1;
    uint8_t z[1024] = {0};
    put(t, z, sizeof z);
}

typedef struct want {
    int64_t n, nbad;
    int damage;
    int label[NSAMPLES]; /* < 0: a bad sample */
} want_t;

/* What the file cut at c should give, worked out from the layout: the
 * members whose data lies whole before c, grouped by sample; the member
 * cut (if any) is damage, and takes its sample with it when the walker
 * can name it: its own header whole, or its long name read. */
static want_t expected(const tar_t *t, size_t c)
{
    want_t w = {0};
    int have[NSAMPLES] = {0}, last = -1;
    int k = 0;
    for (; k < t->nm && t->m[k].end <= c; k++) {
        const mem_t *m = &t->m[k];
        if (m->sample < 0)
            break; /* the end blocks: a clean end */
        have[m->sample] |= m->kind == 'j' ? 1 : m->kind == 'c' ? 2 : 0;
        last = m->sample;
    }
    int ngroups = last + 1;
    if (k < t->nm && t->m[k].sample >= 0 && t->m[k].first < c) {
        const mem_t *m = &t->m[k];
        w.damage = 1;
        int named = c >= m->hdr + 512 || (m->has_long && c >= m->long_end);
        if (named && m->sample == last)
            ngroups--;
    } else if (k < t->nm && t->m[k].sample < 0 && t->m[k].first < c &&
               c < t->m[k].end) {
        w.damage = 1; /* cut inside the first end block: no name */
    }
    w.n = ngroups;
    for (int s = 0; s < ngroups; s++) {
        w.label[s] = have[s] == 3 ? s % 4 : -1;
        w.nbad += have[s] != 3;
    }
    return w;
}

static sl__recfile_t *open_cut(const tar_t *t, size_t c, const char *name,
                               int *rc, char *err, size_t errlen)
{
    sl__bytesrc_t *src;
    assert_int_equal(sl__bytesrc_open_mem(t->p, c, name, &src, err, errlen), 0);
    sl__recfile_t *f = NULL;
    *rc = sl__recfile_open_src(src, SL__FMT_WDS, 1, &f, err, errlen);
    return f;
}

static void test_every_cut(void **state)
{
    (void)state;
    tar_t t;
    make(&t);
    char err[1024];
    int checked = 0, kept_open = 0;
    for (size_t c = 1; c <= t.n; c++) {
        want_t w = expected(&t, c);
        int rc;
        sl__recfile_t *f = open_cut(&t, c, "cut.tar", &rc, err, sizeof err);
        if (w.n == 0) { /* nothing readable: an empty index, or the open
                           fails; neither delivers a sample */
            if (!rc) {
                assert_int_equal(f->n, 0);
                sl__recfile_close(f);
            }
            continue;
        }
        if (rc)
            print_error("cut at %zu: %s\n", c, err);
        assert_int_equal(rc, 0);
        if (f->n != w.n || f->nbad != w.nbad || !!f->damage != w.damage)
            print_error("cut at %zu: %lld samples (%lld bad, damage %s), "
                        "want %lld (%lld bad, damage %d)\n",
                        c, (long long)f->n, (long long)f->nbad,
                        f->damage ? f->damage : "none", (long long)w.n,
                        (long long)w.nbad, w.damage);
        assert_int_equal(f->n, w.n);
        assert_int_equal(f->nbad, w.nbad);
        assert_int_equal(!!f->damage, w.damage);
        for (int64_t s = 0; s < f->n; s++) {
            if (w.label[s] >= 0)
                assert_int_equal(f->recs[s].label, w.label[s]);
            else
                assert_true(f->recs[s].label < 0);
        }
        kept_open += w.damage && f->n > 0;
        checked++;
        sl__recfile_close(f);
    }
    assert_true(checked > 5000);
    assert_true(kept_open > 1000);
    free(t.p);
}

/* The probe's case: cut inside sample 5's image, sample 4 (label, image)
 * whole: five samples and the damage, each sample readable; the sidecar
 * holds the same. */
static void test_cut_inside_next_image(void **state)
{
    (void)state;
    tar_t t;
    make(&t);
    const mem_t *img5 = NULL;
    for (int k = 0; k < t.nm; k++)
        if (t.m[k].sample == 5 && t.m[k].kind == 'j')
            img5 = &t.m[k];
    assert_non_null(img5);
    size_t cut = (size_t)img5->hdr + 512 + 100;
    char err[1024];

    int rc;
    sl__recfile_t *f = open_cut(&t, cut, "cut.tar", &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_int_equal(f->n, 5);
    assert_int_equal(f->nbad, 0);
    assert_non_null(f->damage);
    char want[160];
    snprintf(want, sizeof want,
             "cut.tar: tar header at offset %llu: truncated (member of 885 "
             "bytes, 100 left in the file)",
             (unsigned long long)img5->hdr);
    assert_string_equal(f->damage, want);
    char d[256];
    assert_string_equal(sl__recfile_describe(f, 4, d, sizeof d),
                        "cut.tar: sample 4 (key x/004)");
    sl__bytes_t out = {0};
    for (int64_t s = 0; s < f->n; s++) {
        assert_int_equal(
            sl__recfile_read(f, s, &out, NULL, NULL, err, sizeof err), 0);
        assert_int_equal(out.n, 500 + (size_t)s * 77);
        assert_int_equal(f->recs[s].label, (int)s % 4);
    }

    /* The sidecar: the same samples and damage, read under a URL's name. */
    sl__bytes_t side = {0};
    assert_int_equal(sl__recidx_encode(f, &side), 0);
    sl__recfile_t *g = calloc(1, sizeof *g);
    assert_non_null(g);
    assert_int_equal(sl__bytesrc_open_mem(t.p, cut, "http://h/cut.tar", &g->src,
                                          err, sizeof err),
                     0);
    g->fmt = SL__FMT_WDS;
    assert_int_equal(sl__recidx_decode(g, side.p, side.n, err, sizeof err), 0);
    assert_int_equal(g->n, 5);
    assert_memory_equal(g->recs, f->recs, 5 * sizeof *f->recs);
    assert_string_equal(g->damage + strlen("http://h/"), f->damage);
    sl__recfile_close(g);
    sl__recfile_close(f);
    sl__bytes_free(&side);
    sl__bytes_free(&out);
    free(t.p);
}

static int ignore(void *ctx, const sl__tar_member_t *m, char *err,
                  size_t errlen)
{
    (void)ctx;
    (void)m;
    (void)err;
    (void)errlen;
    return 0;
}

/* Where the walk stopped, and the name of the member there ("" unknown). */
static int stop_at(const tar_t *t, size_t cut, sl__tar_stop_t *stop)
{
    sl__bytesrc_t *src;
    char err[512];
    assert_int_equal(
        sl__bytesrc_open_mem(t->p, cut, "cut.tar", &src, err, sizeof err), 0);
    int rc = sl__tar_walk(src, 0, ignore, NULL, stop, err, sizeof err);
    sl__bytesrc_close(src);
    return rc;
}

static void test_walker_names_the_cut_member(void **state)
{
    (void)state;
    tar_t t;
    make(&t);
    sl__tar_stop_t *stop = malloc(sizeof *stop);
    assert_non_null(stop);
    const mem_t *img5 = &t.m[11], *img3 = &t.m[7];
    assert_true(img5->sample == 5 && img5->kind == 'j');
    assert_true(img3->sample == 3 && img3->kind == 'j' && img3->has_long);
    /* its header whole, its data cut: named */
    assert_int_equal(stop_at(&t, img5->hdr + 512 + 1, stop), SL_ECORRUPT);
    assert_int_equal(stop->at, img5->hdr);
    assert_string_equal(stop->name, "x/005.jpg");
    /* its header cut: its bytes cannot be trusted */
    assert_int_equal(stop_at(&t, img5->hdr + 511, stop), SL_ECORRUPT);
    assert_int_equal(stop->at, img5->hdr);
    assert_string_equal(stop->name, "");
    /* its header cut or missing after a GNU long name: the long name */
    for (uint64_t c = img3->long_end; c < img3->hdr + 512; c += 100) {
        assert_int_equal(stop_at(&t, c, stop), SL_ECORRUPT);
        assert_int_equal(stop->at, c < img3->hdr ? c : img3->hdr);
        assert_int_equal(strncmp(stop->name, "long/ddd", 8), 0);
        assert_string_equal(stop->name + strlen(stop->name) - 6, "/3.jpg");
    }
    /* the long name's own data cut: not yet known */
    assert_int_equal(stop_at(&t, img3->first + 600, stop), SL_ECORRUPT);
    assert_int_equal(stop->at, img3->first);
    assert_string_equal(stop->name, "");
    /* an empty file: refused, as GNU tar and tarfile do (it was read as an
     * archive of no members: its samples lost without a word) */
    char err[256];
    sl__bytesrc_t *src;
    assert_int_equal(
        sl__bytesrc_open_mem(t.p, 0, "empty.tar", &src, err, sizeof err), 0);
    assert_int_equal(sl__tar_walk(src, 0, ignore, NULL, stop, err, sizeof err),
                     SL_ECORRUPT);
    sl__bytesrc_close(src);
    assert_int_equal(stop->at, 0);
    assert_non_null(strstr(err, "empty.tar"));
    assert_non_null(strstr(err, "an empty file"));
    /* a bad checksum: not trusted */
    t.p[img5->hdr + 3] ^= 1;
    assert_int_equal(stop_at(&t, t.n, stop), SL_ECORRUPT);
    assert_string_equal(stop->name, "");
    free(stop);
    free(t.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cut),
        cmocka_unit_test(test_cut_inside_next_image),
        cmocka_unit_test(test_walker_names_the_cut_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
