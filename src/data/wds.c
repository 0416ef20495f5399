/* data/wds: a WebDataset tar shard's samples (data/recfile.h).
 *
 * Grouping follows the webdataset package (tariterators.group_by_keys):
 * a member's key is its name up to the first dot of its base name, its
 * suffix the rest, lower-cased ("a/b.seg.png": key "a/b", suffix
 * "seg.png"); consecutive members with one key make a sample; members
 * without a dot, and top-level "__*__" names, are skipped. A sample is an
 * image (suffix jpg, jpeg or png) and a label (suffix cls: an ASCII
 * integer); other members are ignored.
 *
 * Damage (a file cut short, a bad header) ends the walk; with skip_bad the
 * samples before it stay, and so does the one being gathered unless the
 * member lost is known to be one of its own (the walker read its name from
 * a sound header; data/tar_walk.h): every member the file holds of that
 * sample is whole, and where the lost member was its label or image it is
 * a bad sample, as a file cut exactly at that member's header makes it.
 * This is what the webdataset package yields (tarfile ends the archive at
 * a header it cannot read, and group_by_keys yields the open sample). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/recfile.h"
#include "data/shard.h"
#include "data/tar_walk.h"

#define CLS_MAX 32 /* longest .cls member read */

typedef struct group {
    sl__recfile_t *f;
    int skip_bad;
    char key[SL__TAR_NAME_MAX + 1];
    int open;     /* a sample is being gathered */
    uint64_t hdr; /* its first member's header */
    int nimg;     /* image members seen */
    uint64_t img_off, img_size, img_hdr;
    int have_label;
    int64_t label;
    char why[160]; /* the first problem found in the sample, or "" */
    sl__tar_stop_t stop;
} group_t;

/* Splits name into key length and suffix (NULL: no dot, skipped). */
static const char *split(const char *name, size_t *keylen)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base)
        return NULL;
    *keylen = (size_t)(dot - name);
    return dot + 1;
}

static int parse_cls(const char *p, size_t n, int64_t *v)
{
    size_t k = 0;
    while (k < n && isspace((unsigned char)p[k]))
        k++;
    int neg = k < n && (p[k] == '-' || p[k] == '+') ? p[k++] == '-' : 0;
    size_t d0 = k;
    int64_t x = 0;
    for (; k < n && isdigit((unsigned char)p[k]); k++) {
        if (x > (INT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (p[k] - '0');
    }
    if (k == d0)
        return -1;
    while (k < n && isspace((unsigned char)p[k]))
        k++;
    if (k != n)
        return -1;
    *v = neg ? -x : x;
    return 0;
}

static int finish(group_t *g, char *err, size_t errlen)
{
    if (!g->open)
        return 0;
    g->open = 0;
    sl__recfile_t *f = g->f;
    if (!g->why[0] && !g->nimg)
        snprintf(g->why, sizeof g->why, "no image member (.jpg, .jpeg, .png)");
    if (!g->why[0] && !g->have_label)
        snprintf(g->why, sizeof g->why, "no .cls label member");
    if (!g->why[0] && (g->label < 0 || g->label >= SL__SHARD_CLASSES_MAX))
        snprintf(g->why, sizeof g->why, "label %lld out of range [0, %d)",
                 (long long)g->label, SL__SHARD_CLASSES_MAX);
    if (!g->why[0] && g->img_size > SL__REC_MAX)
        snprintf(g->why, sizeof g->why, "image of %llu bytes (the limit is %u)",
                 (unsigned long long)g->img_size, SL__REC_MAX);
    sl__rec_t r = {.off = g->img_off,
                   .hdr = g->nimg ? g->img_hdr : g->hdr,
                   .len = (uint32_t)g->img_size,
                   .img_len = (uint32_t)g->img_size,
                   .label = (int32_t)g->label};
    char msg[SL__TAR_NAME_MAX + 512] = "";
    if (g->why[0])
        snprintf(msg, sizeof msg, "%s: sample %lld (key %s): %s",
                 sl__bytesrc_name(f->src), (long long)f->n, g->key, g->why);
    if (g->why[0] && !g->skip_bad)
        return sl__fail(err, errlen, SL_ECORRUPT, "%s", msg);
    if (sl__recfile_add(f, &r, g->why[0] ? SL_ECORRUPT : 0, msg))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return 0;
}

static int on_member(void *ctx, const sl__tar_member_t *m, char *err,
                     size_t errlen)
{
    group_t *g = ctx;
    size_t keylen;
    const char *suffix = split(m->name, &keylen);
    if (!suffix)
        return 0;
    if (!strchr(m->name, '/') && !strncmp(m->name, "__", 2) && keylen >= 4 &&
        !strncmp(m->name + keylen - 2, "__", 2))
        return 0; /* webdataset's meta members */
    if (!g->open || strlen(g->key) != keylen ||
        memcmp(g->key, m->name, keylen)) {
        int rc = finish(g, err, errlen);
        if (rc)
            return rc;
        memcpy(g->key, m->name, keylen);
        g->key[keylen] = 0;
        g->open = 1;
        g->hdr = m->header;
        g->nimg = 0;
        g->have_label = 0;
        g->label = -1;
        g->img_size = 0;
        g->why[0] = 0;
    }
    char sfx[16];
    size_t sl = strlen(suffix);
    if (sl >= sizeof sfx)
        return 0;
    for (size_t k = 0; k <= sl; k++)
        sfx[k] = (char)tolower((unsigned char)suffix[k]);
    if (!strcmp(sfx, "jpg") || !strcmp(sfx, "jpeg") || !strcmp(sfx, "png")) {
        if (g->nimg++ && !g->why[0])
            snprintf(g->why, sizeof g->why, "more than one image member");
        g->img_off = m->data;
        g->img_size = m->size;
        g->img_hdr = m->header;
    } else if (!strcmp(sfx, "cls")) {
        if (g->have_label++ && !g->why[0])
            snprintf(g->why, sizeof g->why, "more than one .cls member");
        char buf[CLS_MAX];
        int rc;
        if (m->size > CLS_MAX) {
            if (!g->why[0])
                snprintf(g->why, sizeof g->why,
                         ".cls member of %llu bytes is not a label",
                         (unsigned long long)m->size);
        } else if ((rc = sl__bytesrc_read(g->f->src, m->data, buf,
                                          (size_t)m->size, err, errlen))) {
            return rc;
        } else if (parse_cls(buf, (size_t)m->size, &g->label) && !g->why[0]) {
            snprintf(g->why, sizeof g->why, ".cls is not an integer: \"%.*s\"",
                     (int)m->size, buf);
            for (char *p = g->why; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                    *p = '?';
        }
    }
    return 0;
}

/* 1 when the member the walk lost (g->stop.name, "" unknown) has the key
 * of the sample being gathered: that sample is incomplete. */
static int lost_own_member(const group_t *g)
{
    size_t keylen;
    const char *name = g->stop.name;
    return g->open && name[0] && split(name, &keylen) &&
           strlen(g->key) == keylen && !memcmp(g->key, name, keylen);
}

int sl__wds_index(sl__recfile_t *f, int skip_bad, char *err, size_t errlen)
{
    group_t *g = calloc(1, sizeof *g);
    if (!g)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    g->f = f;
    g->skip_bad = skip_bad;
    int rc = sl__tar_walk(f->src, 0, on_member, g, &g->stop, err, errlen);
    if (rc == SL_ECORRUPT && skip_bad && !f->damage) {
        /* Damage: the samples before it stay (see the top of the file). */
        f->damage = strdup(err);
        rc = f->damage ? 0 : sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        if (lost_own_member(g))
            g->open = 0;
    }
    if (!rc)
        rc = finish(g, err, errlen);
    free(g);
    return rc;
}

static int first_name(void *ctx, const sl__tar_member_t *m, char *err,
                      size_t errlen)
{
    (void)err;
    (void)errlen;
    snprintf(ctx, SL__TAR_NAME_MAX + 1, "%s", m->name);
    return 1;
}

const char *sl__wds_key(const sl__recfile_t *f, uint64_t hdr, char *buf,
                        size_t len)
{
    char name[SL__TAR_NAME_MAX + 1] = "?", err[256];
    size_t keylen;
    if (sl__tar_walk(f->src, hdr, first_name, name, NULL, err, sizeof err) ==
            1 &&
        split(name, &keylen))
        name[keylen] = 0;
    snprintf(buf, len, "%s", name);
    return buf;
}
