/* volume/dataset: a list of volume cases (sluice/volume.h): a folder in
 * the KiTS19 layout (CASE/imaging.nii.gz + CASE/segmentation.nii.gz), a
 * list file ("IMAGE [LABEL]" per line), or a pack of volume records
 * (`sluice pack --volumes`: one record per case, volume/volrec, streamed
 * through data/shard_stream). Opening reads names only;
 * sl_volume_dataset_load reads a case. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base.h"
#include "data/pack_dir.h"
#include "sluice/volume.h"
#include "vol_internal.h"
#include "volrec.h"

#define LIST_MAX_BYTES (64 << 20) /* a list file larger is refused */

struct sl_volume_dataset {
    int64_t n;
    size_t cap;
    struct vcase {
        char *name, *image, *label; /* paths; NULL in a pack */
        int has_label;
        int shard; /* a pack's: the record's shard (-1: files) and index */
        uint64_t record;
    } * c;
    sl__pack_dir_t pack; /* a pack's shards (nshards 0 otherwise) */
};

/* KiTS19's names; .nii.gz first. */
static const char *const images[] = {"imaging.nii.gz", "imaging.nii"};
static const char *const labels[] = {"segmentation.nii.gz", "segmentation.nii"};

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int add(sl_volume_dataset_t *d, const char *name, char *image,
               char *label, char *err, size_t errlen)
{
    char *nm = strdup(name);
    if (!nm ||
        sl__array_reserve(&d->c, &d->cap, (size_t)d->n + 1, sizeof *d->c, 64)) {
        free(nm), free(image), free(label);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    d->c[d->n++] = (struct vcase){nm, image, label, label != NULL, -1, 0};
    return 0;
}

/* The first of names[0..1] that is a file in dir, or NULL (*nomem set when
 * a path could not be made). */
static char *find(const char *dir, const char *const names[2], int *nomem)
{
    for (int i = 0; i < 2; i++) {
        char *p = sl__path_join(dir, names[i]);
        if (!p) {
            *nomem = 1;
            return NULL;
        }
        if (is_file(p))
            return p;
        free(p);
    }
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_kits(sl_volume_dataset_t *d, const char *root, int unlabeled,
                     char *err, size_t errlen)
{
    DIR *dir = opendir(root);
    if (!dir)
        return sl__fail(err, errlen, sl__errno_code(errno, SL_EIO), "%s: %s",
                        root, strerror(errno));
    char **subs = NULL;
    size_t nsub = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        char *s = strdup(e->d_name);
        if (!s || sl__array_reserve(&subs, &cap, nsub + 1, sizeof *subs, 64)) {
            free(s);
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            break;
        }
        subs[nsub++] = s;
    }
    closedir(dir);
    if (nsub)
        qsort(subs, nsub, sizeof *subs, cmp_str);
    for (size_t i = 0; !rc && i < nsub; i++) {
        char *sub = sl__path_join(root, subs[i]);
        struct stat st;
        if (!sub) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            break;
        }
        int nomem = 0;
        char *img = NULL, *lab = NULL;
        if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            img = find(sub, images, &nomem);
            lab = find(sub, labels, &nomem);
        }
        if (nomem)
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        else if (!img && lab)
            rc = sl__fail(err, errlen, SL_ENOTFOUND,
                          "%s: a label (%s) without its image (imaging.nii.gz "
                          "or imaging.nii)",
                          sub, lab);
        else if (img && !lab && !unlabeled)
            rc = sl__fail(
                err, errlen, SL_ENOTFOUND,
                "%s: no label volume (segmentation.nii.gz or "
                "segmentation.nii) beside %s; a dataset of cases "
                "without labels must say so (unlabeled=True; --unlabeled)",
                sub, img);
        else if (img) {
            rc = add(d, subs[i], img, lab, err, errlen);
            img = lab = NULL;
        }
        free(img), free(lab), free(sub);
    }
    sl__strv_free(subs, (int64_t)nsub);
    if (!rc && d->n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no case folders (CASE/imaging.nii.gz) and not a "
                      "list file",
                      root);
    return rc;
}

/* path as written, or relative to the list's folder. */
static char *resolve(const char *base, const char *p)
{
    if (p[0] == '/' || !base)
        return strdup(p);
    return sl__path_join(base, p);
}

static int open_list(sl_volume_dataset_t *d, const char *list, int unlabeled,
                     char *err, size_t errlen)
{
    char *text;
    size_t size;
    int rc =
        sl__read_small_file(list, LIST_MAX_BYTES, &text, &size, err, errlen);
    if (rc)
        return rc;
    char *base = NULL;
    const char *slash = strrchr(list, '/');
    if (slash && !(base = strndup(list, (size_t)(slash - list + 1)))) {
        free(text);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    if (base && strlen(base) > 1)
        base[strlen(base) - 1] = 0; /* "dir/" -> "dir"; "/" stays */
    int lineno = 0;
    char *end = text + size; /* lines by length: a NUL must not end them */
    for (char *line = text, *next; !rc && line < end; line = next) {
        lineno++;
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t len = (size_t)((nl ? nl : end) - line);
        next = nl ? nl + 1 : end;
        line[len] = 0;
        if (memchr(line, 0, len)) {
            rc = sl__fail(err, errlen, SL_ECORRUPT, "%s:%d: NUL byte", list,
                          lineno);
            break;
        }
        if (len && line[len - 1] == '\r')
            line[--len] = 0;
        char *f[3] = {NULL, NULL, NULL}, *save = NULL;
        int nf = 0;
        for (char *t = strtok_r(line, " \t", &save); t;
             t = strtok_r(NULL, " \t", &save))
            if (nf < 3)
                f[nf++] = t;
            else
                nf++;
        if (nf == 0 || f[0][0] == '#')
            continue;
        if (nf > 2) {
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "%s:%d: %d fields; a line is IMAGE [LABEL] (paths "
                          "without spaces)",
                          list, lineno, nf);
            break;
        }
        char *img = resolve(base, f[0]),
             *lab = f[1] ? resolve(base, f[1]) : NULL;
        if (!img || (f[1] && !lab))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        else if (!is_file(img))
            rc = sl__fail(err, errlen, SL_ENOTFOUND,
                          "%s:%d: image %s: not found (or not a file)", list,
                          lineno, img);
        else if (lab && !is_file(lab))
            rc = sl__fail(err, errlen, SL_ENOTFOUND,
                          "%s:%d: label %s: not found (or not a file)", list,
                          lineno, lab);
        else if (!lab && !unlabeled)
            rc = sl__fail(err, errlen, SL_ENOTFOUND,
                          "%s:%d: %s has no label (a line is IMAGE LABEL; a "
                          "dataset of cases without labels must say so: "
                          "unlabeled=True; --unlabeled)",
                          list, lineno, f[0]);
        if (rc) {
            free(img), free(lab);
            break;
        }
        rc = add(d, f[0], img, lab, err, errlen);
    }
    free(base);
    free(text);
    if (!rc && d->n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: lists no volume", list);
    return rc;
}

/* A pack of volume records: a record's label field says whether the case
 * has a label volume (1) or not (0). */
static int open_pack(sl_volume_dataset_t *d, const char *path, int unlabeled,
                     char *err, size_t errlen)
{
    int rc = sl__pack_dir_open(path, SL__PACK_STRICT, &d->pack, err, errlen);
    for (int s = 0; !rc && s < d->pack.nshards; s++) {
        const sl__shard_t *sh = d->pack.shards[s];
        for (uint64_t i = 0; !rc && i < sl__shard_count(sh); i++) {
            const sl__shard_entry_t *e = sl__shard_entry(sh, i);
            if (e->label != 0 && e->label != 1)
                rc = sl__fail(err, errlen, SL_ECORRUPT,
                              "%s: record %" PRIu64 " (%s): label %" PRId64
                              " (a volume record's is 1 with a label "
                              "volume, 0 without): not a pack of volumes?",
                              sl__shard_path(sh), i, e->name, e->label);
            else if (!e->label && !unlabeled)
                rc = sl__fail(err, errlen, SL_ENOTFOUND,
                              "%s: record %" PRIu64 " (%s) has no label "
                              "volume; a dataset of cases without labels "
                              "must say so (unlabeled=True; --unlabeled)",
                              sl__shard_path(sh), i, e->name);
            else if (!(rc = add(d, e->name, NULL, NULL, err, errlen))) {
                d->c[d->n - 1].has_label = (int)e->label;
                d->c[d->n - 1].shard = s;
                d->c[d->n - 1].record = i;
            }
        }
    }
    if (!rc && d->n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: a pack of no volume",
                      path);
    return rc;
}

int sl_volume_dataset_open(const char *path, const sl_volume_options_t *opt,
                           sl_volume_dataset_t **out, char *err, size_t errlen)
{
    char scratch[1];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (out)
        *out = NULL;
    sl_volume_options_t o;
    if (sl__vol_call_in("sl_volume_dataset_open", path && out,
                        "path and out are required", opt, &o, err, errlen))
        return SL_EINVAL;
    struct stat st;
    if (stat(path, &st) != 0)
        return sl__fail(err, errlen, sl__errno_code(errno, SL_ENOTFOUND),
                        "%s: %s", path, strerror(errno));
    sl_volume_dataset_t *d = calloc(1, sizeof *d);
    if (!d)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = !S_ISDIR(st.st_mode) ? open_list(d, path, o.unlabeled, err, errlen)
             : sl__pack_dir_holds(path)
                 ? open_pack(d, path, o.unlabeled, err, errlen)
                 : open_kits(d, path, o.unlabeled, err, errlen);
    if (rc) {
        sl_volume_dataset_destroy(d);
        return rc;
    }
    *out = d;
    return 0;
}

void sl_volume_dataset_destroy(sl_volume_dataset_t *d)
{
    if (!d)
        return;
    for (int64_t i = 0; i < d->n; i++)
        free(d->c[i].name), free(d->c[i].image), free(d->c[i].label);
    free(d->c);
    sl__pack_dir_close(&d->pack);
    free(d);
}

int64_t sl_volume_dataset_count(const sl_volume_dataset_t *d)
{
    return d ? d->n : 0;
}

const char *sl_volume_dataset_name(const sl_volume_dataset_t *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->c[i].name : NULL;
}

const char *sl_volume_dataset_image(const sl_volume_dataset_t *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->c[i].image : NULL;
}

const char *sl_volume_dataset_label(const sl_volume_dataset_t *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->c[i].label : NULL;
}

int sl_volume_dataset_has_label(const sl_volume_dataset_t *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->c[i].has_label : 0;
}

/* max_bytes as a hook for the shard reader: a record stream (or a
 * record read whole) whose buffers would pass it is refused unread. */
static int admit_cap(void *ctx, int64_t bytes, char *err, size_t errlen)
{
    int64_t cap = *(const int64_t *)ctx;
    if (bytes <= cap)
        return 0;
    return sl__fail(err, errlen, SL_ENOMEM,
                    "reading it needs %.1f MB, max_bytes allows %.1f MB",
                    (double)bytes / 1e6, (double)cap / 1e6);
}

/* A volume's data from its case's record, streamed (data/shard_stream):
 * what follows the data (the label after the image) is read at the end
 * too, so that the record's checksum is checked. */
static int rec_read(void *ctx, void *dst, size_t n, char *err, size_t errlen)
{
    return sl__shard_stream_read(ctx, dst, n, err, errlen);
}

static int rec_finish(void *ctx, char *err, size_t errlen)
{
    return sl__shard_stream_read(ctx, NULL, (size_t)sl__shard_stream_left(ctx),
                                 err, errlen);
}

static void rec_close(void *ctx)
{
    sl__shard_stream_close(ctx);
}

/* Volume k of case i (a pack's) as a NIfTI stream over the case's record
 * streamed: the record's layout read in order up to the volume's data
 * (an image's passed over to reach the label), checked against the index;
 * `name` for messages. The record is never held whole: a stream holds
 * its pieces and zstd's window (SL__SHARD_STREAM_BYTES). */
static int part_stream(const sl_volume_dataset_t *d, int64_t i, unsigned k,
                       const sl_volume_options_t *o, const char *name,
                       sl__nifti_stream_t **out, char *err, size_t errlen)
{
    const struct vcase *c = &d->c[i];
    const sl__shard_t *sh = d->pack.shards[c->shard];
    int64_t cap = o->max_bytes > 0 ? o->max_bytes : (INT64_C(4) << 30);
    sl__admit_t admit = {admit_cap, &cap};
    sl__shard_stream_t *st = NULL;
    int rc = sl__shard_stream_open(sh, c->record, &admit, &st, err, errlen);
    if (rc)
        return rc;
    sl__vol_src_t src = {rec_read, rec_finish, rec_close, st};
    char where[1024];
    snprintf(where, sizeof where, "%s: record %" PRIu64 " (%s)",
             sl__shard_path(sh), c->record, c->name);
    unsigned count = 0;
    uint8_t hdr[SL__NIFTI2_HDR];
    size_t hlen = 0;
    uint64_t dlen = 0, skip = 0;
    rc = sl__volrec_seek(&src, sl__shard_entry(sh, c->record)->raw_size, where,
                         k, &count, hdr, &hlen, &dlen, &skip, err, errlen);
    if (!rc && count != 1u + (unsigned)c->has_label)
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: %u volumes, its index says %d", where, count,
                      1 + c->has_label);
    /* version 2: the data before this volume's is passed over when (if)
     * its data is read */
    if (!rc && sl__volrec_skipping(&src, skip))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (rc) {
        sl__shard_stream_close(st);
        return rc;
    }
    return sl__nifti_stream_src(hdr, hlen, dlen, name, &src, out, err, errlen);
}

/* What the two per-case calls make of a case: volumes (load) or readers. */
typedef struct access {
    const char *fn;
    /* from a file */
    int (*file)(const char *path, const sl_volume_options_t *o, void **out,
                char *err, size_t errlen);
    /* from a stream over a pack's record (taken) */
    int (*part)(sl__nifti_stream_t *n, const char *name,
                const sl_volume_options_t *o, void **out, char *err,
                size_t errlen);
    void (*drop)(void *);
} access_t;

static int load_file(const char *path, const sl_volume_options_t *o, void **out,
                     char *err, size_t errlen)
{
    sl_volume_t *v = NULL;
    int rc = sl_volume_load(path, o, &v, err, errlen);
    *out = v;
    return rc;
}

static int load_part(sl__nifti_stream_t *n, const char *name,
                     const sl_volume_options_t *o, void **out, char *err,
                     size_t errlen)
{
    (void)name;
    sl_volume_t *v = NULL;
    int rc = sl__nifti_stream_load(n, o, NULL, &v, err, errlen);
    sl__nifti_stream_close(n);
    *out = v;
    return rc;
}

static void load_drop(void *v)
{
    sl_volume_free(v);
}

static int reader_file(const char *path, const sl_volume_options_t *o,
                       void **out, char *err, size_t errlen)
{
    sl_volume_reader_t *r = NULL;
    int rc = sl_volume_reader_open(path, o, &r, err, errlen);
    *out = r;
    return rc;
}

static int reader_part(sl__nifti_stream_t *n, const char *name,
                       const sl_volume_options_t *o, void **out, char *err,
                       size_t errlen)
{
    sl_volume_reader_t *r = NULL;
    int rc = sl__volume_reader_make(n, name, o, &r, err, errlen);
    *out = r;
    return rc;
}

static void reader_drop(void *r)
{
    sl_volume_reader_close(r);
}

static const access_t loads = {"sl_volume_dataset_load", load_file, load_part,
                               load_drop};
static const access_t readers = {"sl_volume_dataset_readers", reader_file,
                                 reader_part, reader_drop};

/* A pack's case: each wanted volume from a stream of its own over the
 * case's record. */
static int case_packed(const access_t *a, const sl_volume_dataset_t *d,
                       int64_t i, const sl_volume_options_t *o, void **out[2],
                       char *err, size_t errlen)
{
    const struct vcase *c = &d->c[i];
    char name[1024];
    int rc = 0;
    for (unsigned k = 0; !rc && k < 2; k++) {
        if (!out[k] || (k == 1 && !c->has_label))
            continue;
        snprintf(name, sizeof name, "%s: record %" PRIu64 " (%s): %s",
                 sl__shard_path(d->pack.shards[c->shard]), c->record, c->name,
                 k ? "label" : "image");
        sl__nifti_stream_t *n = NULL;
        if (!(rc = part_stream(d, i, k, o, name, &n, err, errlen)))
            rc = a->part(n, name, o, out[k], err, errlen);
    }
    return rc;
}

/* sl_volume_dataset_load and _readers: case i's image and (when label is
 * not NULL and the case has one) label, as `a` makes them; nothing on
 * failure. */
static int case_call(const access_t *a, const sl_volume_dataset_t *d, int64_t i,
                     const sl_volume_options_t *opt, void **image, void **label,
                     char *err, size_t errlen)
{
    char scratch[1], why[64];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (image)
        *image = NULL;
    if (label)
        *label = NULL;
    snprintf(why, sizeof why, "no case %" PRId64, i);
    sl_volume_options_t o;
    if (sl__vol_call_in(a->fn, d && i >= 0 && i < d->n && image, why, opt, &o,
                        err, errlen))
        return SL_EINVAL;
    int rc;
    if (d->c[i].shard >= 0) {
        void **out[2] = {image, label};
        rc = case_packed(a, d, i, &o, out, err, errlen);
    } else {
        rc = a->file(d->c[i].image, &o, image, err, errlen);
        if (!rc && label && d->c[i].label)
            rc = a->file(d->c[i].label, &o, label, err, errlen);
    }
    if (rc) {
        a->drop(*image);
        *image = NULL;
        if (label) {
            a->drop(*label);
            *label = NULL;
        }
    }
    return rc;
}

int sl_volume_dataset_load(const sl_volume_dataset_t *d, int64_t i,
                           const sl_volume_options_t *opt, sl_volume_t **image,
                           sl_volume_t **label, char *err, size_t errlen)
{
    void *im = NULL, *lb = NULL;
    int rc = case_call(&loads, d, i, opt, image ? &im : NULL,
                       label ? &lb : NULL, err, errlen);
    if (image)
        *image = im;
    if (label)
        *label = lb;
    return rc;
}

int sl_volume_dataset_readers(const sl_volume_dataset_t *d, int64_t i,
                              const sl_volume_options_t *opt,
                              sl_volume_reader_t **image,
                              sl_volume_reader_t **label, char *err,
                              size_t errlen)
{
    void *im = NULL, *lb = NULL;
    int rc = case_call(&readers, d, i, opt, image ? &im : NULL,
                       label ? &lb : NULL, err, errlen);
    if (image)
        *image = im;
    if (label)
        *label = lb;
    return rc;
}
