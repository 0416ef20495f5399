#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "brace.h"
#include "folder.h"
#include "pack_dir.h"
#include "recset.h"
#include "remote.h"
#include "remote_parse.h"
#include "shard.h"

/* Records are addressed by a global index; shard k holds
 * [first[k], first[k+1]). */
struct sl__source {
    char *path;
    char *shown;          /* path as printed (a URL's secrets hidden) */
    sl__folder_t *folder; /* ImageFolder source, or NULL */
    sl__shard_t **shards; /* shard source */
    int nshards;
    int64_t *first; /* nshards + 1 */
    int nclasses;
    char **classes;
    int classes_block;     /* classes is one block (numbered classes) */
    int64_t label_classes; /* the label rule's classes (-1: numbered) */
    int nbad;
    char **bad;
    char *first_bad;   /* the first shard left out: its cause, as given */
    sl__recset_t *set; /* WebDataset / TFRecord files (data/recset), or NULL */
};

static int add_bad(sl__source_t *s, const char *msg, const char *what)
{
    if (sl__msg_list_add(&s->bad, &s->nbad, msg, what))
        return SL_ENOMEM;
    if (!s->first_bad && !(s->first_bad = strdup(msg)))
        return SL_ENOMEM;
    return 0;
}

/* No classes.txt: classes 0..n-1 named by their number, all in one block
 * (n <= SL__SHARD_CLASSES_MAX, by the label rule). */
static int number_classes(sl__source_t *s, int n)
{
    size_t chars = 0;
    char num[16];
    for (int c = 0; c < n; c++)
        chars += (size_t)snprintf(num, sizeof num, "%d", c) + 1;
    char **v = malloc((size_t)n * sizeof *v + chars);
    if (!v)
        return SL_ENOMEM;
    char *p = (char *)(v + n);
    for (int c = 0; c < n; c++) {
        v[c] = p;
        p += snprintf(p, sizeof num, "%d", c) + 1;
    }
    s->classes = v;
    s->nclasses = n;
    s->classes_block = 1;
    return 0;
}

/* Takes the opened shards: record ranges, and every label checked
 * (sl__shard_label_check against classes.txt, or against the bound on
 * numbered classes without one). A bad label fails the open unless
 * skip_bad; then reading that record fails (sl__source_read), so the
 * loader counts and lists it and never delivers it. */
static int index_shards(sl__source_t *s, int have_classes, int skip_bad,
                        char *err, size_t errlen)
{
    int64_t total = 0, maxlabel = -1;
    int64_t classes = have_classes ? s->nclasses : -1;
    for (int k = 0; k < s->nshards; k++) {
        sl__shard_t *sh = s->shards[k];
        for (uint64_t i = 0; i < sl__shard_count(sh); i++) {
            int rc = sl__shard_label_check(sh, i, classes, err, errlen);
            if (rc && !skip_bad)
                return rc;
            int64_t lab = sl__shard_entry(sh, i)->label;
            if (!rc && lab > maxlabel)
                maxlabel = lab;
        }
        s->first[k] = total;
        total += (int64_t)sl__shard_count(sh);
    }
    s->first[s->nshards] = total;
    /* Nothing left: the causes go in the message (no skipped: list is
     * printed for a source that did not open). */
    if (total == 0 && s->nbad)
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "%s: no readable records: %d of %d shards left out; "
                        "the first: %s",
                        s->shown, s->nbad, s->nbad + s->nshards, s->first_bad);
    if (total == 0)
        return sl__fail(err, errlen, SL_ENOTFOUND, "%s: no readable records",
                        s->shown);
    s->label_classes = classes;
    if (!have_classes && maxlabel >= 0 && number_classes(s, (int)maxlabel + 1))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return 0;
}

/* A folder of shards: opened and checked as a whole pack (data/pack_dir). */
static int open_pack(sl__source_t *s, const char *dir, int skip_bad, char *err,
                     size_t errlen)
{
    sl__pack_dir_t p;
    int rc = sl__pack_dir_open(
        dir, skip_bad ? SL__PACK_SKIP_DAMAGED : SL__PACK_STRICT, &p, err,
        errlen);
    if (rc)
        return rc;
    for (int i = 0; i < p.nbad && !rc; i++)
        if (add_bad(s, p.bad[i], " (whole shard left out)"))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    s->shards = p.shards;
    s->nshards = p.nshards;
    p.shards = NULL;
    p.nshards = 0;
    int have_classes = p.nclasses >= 0;
    if (have_classes) {
        s->classes = p.classes;
        s->nclasses = p.nclasses;
        p.classes = NULL;
        p.nclasses = -1;
    }
    sl__pack_dir_close(&p);
    s->first = calloc((size_t)s->nshards + 1, sizeof *s->first);
    if (!rc && !s->first)
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return rc ? rc : index_shards(s, have_classes, skip_bad, err, errlen);
}

/* One shard file, without classes.txt. */
static int open_one(sl__source_t *s, char *err, size_t errlen)
{
    s->shards = calloc(1, sizeof *s->shards);
    s->first = calloc(2, sizeof *s->first);
    if (!s->shards || !s->first)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = sl__shard_open(s->path, &s->shards[0], err, errlen);
    if (rc)
        return rc;
    s->nshards = 1;
    return index_shards(s, 0, 0, err, errlen);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Sluice shards at URLs: one, a brace pattern, or the *.sls objects of an
 * s3:// prefix ending in '/' (data/recset's names), numbered classes; or
 * local shards named by a brace pattern. With
 * skip_bad a shard that cannot be opened is left out and listed. */
static int open_urls(sl__source_t *s, int skip_bad, char *err, size_t errlen)
{
    char **names = NULL;
    int n = 0, m = 0;
    int rc = sl__recset_names(s->path, &names, &n, err, errlen);
    if (!rc && sl__recset_is_listing(s->path)) {
        for (int i = 0; i < n; i++)
            if (ends_with(names[i], ".sls")) {
                char *t = names[m];
                names[m++] = names[i];
                names[i] = t;
            }
        if (m == 0)
            rc = sl__fail(err, errlen, SL_ENOTFOUND,
                          "%s: no .sls, .tar or .tfrecord objects under it",
                          s->shown);
    } else {
        m = n;
    }
    if (!rc && (!(s->shards = calloc((size_t)m, sizeof *s->shards)) ||
                !(s->first = calloc((size_t)m + 1, sizeof *s->first))))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    for (int i = 0; i < m && !rc; i++) {
        rc = sl__shard_open(names[i], &s->shards[s->nshards], err, errlen);
        if (!rc) {
            s->nshards++;
        } else if (skip_bad && sl__err_is_data(rc) && rc != SL_ENOMEM) {
            rc = add_bad(s, err, " (whole shard left out)")
                     ? sl__fail(err, errlen, SL_ENOMEM, "out of memory")
                     : 0;
        }
    }
    sl__strv_free(names, n);
    return rc ? rc : index_shards(s, 0, skip_bad, err, errlen);
}

/* A URL whose path ends in '/' (a folder) but is not an s3:// prefix (a
 * listing: open_urls): an http server answers it with 403 or an HTML
 * index, never files; refused at once. */
static int url_names_folder(const char *url)
{
    size_t n = strcspn(url, "?#");
    return n > 0 && url[n - 1] == '/' && !sl__brace_has(url) &&
           !sl__recset_is_listing(url);
}

int sl__source_open(const char *path, int skip_bad, sl__source_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    sl__source_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path)) ||
        !(s->shown =
              strstr(path, "://") ? sl__remote_redact(path) : strdup(path))) {
        if (s)
            free(s->path);
        free(s);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    struct stat st;
    const char *files;
    if (sl__recset_format(path, &files)) {
        rc = sl__recset_open(path, skip_bad, &s->set, err, errlen);
        if (!rc && number_classes(s, (int)s->set->max_label + 1))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    } else if (sl__remote_is_url(path) && url_names_folder(path)) {
        char **none; /* only s3:// prefixes list: this refuses any */
        int n;       /* other, naming it redacted */
        rc = sl__remote_list(path, &none, &n, err, errlen);
        if (!rc) { /* not reached */
            sl__strv_free(none, n);
            rc = sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: not a listing",
                          s->shown);
        }
    } else if (sl__remote_is_url(path)) {
        rc = open_urls(s, skip_bad, err, errlen);
    } else if (stat(path, &st) != 0 && sl__brace_has(path)) {
        rc = open_urls(s, skip_bad, err, errlen); /* local shards, braced */
    } else if (stat(path, &st) != 0) {
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: %s", path,
                      strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        if (sl__pack_dir_holds(path)) {
            rc = open_pack(s, path, skip_bad, err, errlen);
        } else {
            rc = sl__folder_scan(path, skip_bad, &s->folder, err, errlen);
            if (!rc) {
                s->nclasses = s->folder->nclasses;
                s->classes = s->folder->classes;
            }
        }
    } else {
        rc = open_one(s, err, errlen);
    }
    if (rc) {
        sl__source_close(s);
        sl__msg_escape(err, errlen); /* it may name a file */
        return rc;
    }
    *out = s;
    return 0;
}

void sl__source_close(sl__source_t *s)
{
    if (!s)
        return;
    if (s->folder)
        sl__folder_free(s->folder); /* owns classes */
    else if (s->classes_block)
        free(s->classes);
    else
        sl__strv_free(s->classes, s->nclasses);
    for (int i = 0; i < s->nshards; i++)
        sl__shard_close(s->shards[i]);
    sl__strv_free(s->bad, s->nbad);
    free(s->first_bad);
    sl__recset_close(s->set);
    free(s->shards);
    free(s->first);
    free(s->path);
    free(s->shown);
    free(s);
}

int64_t sl__source_count(const sl__source_t *s)
{
    if (s->set)
        return sl__recset_count(s->set);
    return s->folder ? s->folder->n : s->first[s->nshards];
}

int sl__source_num_classes(const sl__source_t *s)
{
    return s->nclasses;
}

const char *sl__source_class_name(const sl__source_t *s, int c)
{
    return c >= 0 && c < s->nclasses ? s->classes[c] : NULL;
}

/* Shard holding global record i (binary search over first[]). */
static int find_shard(const sl__source_t *s, int64_t i, uint64_t *local)
{
    int lo = 0, hi = s->nshards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    *local = (uint64_t)(i - s->first[lo]);
    return lo;
}

int64_t sl__source_label(const sl__source_t *s, int64_t i)
{
    if (s->folder)
        return s->folder->labels[i];
    if (s->set) {
        int64_t k = 0;
        return sl__recset_locate(s->set, i, &k)->recs[k].label;
    }
    uint64_t k;
    int sh = find_shard(s, i, &k);
    return sl__shard_entry(s->shards[sh], k)->label;
}

const char *sl__source_describe(const sl__source_t *s, int64_t i, char *buf,
                                size_t len)
{
    if (s->folder) {
        sl__path_join_buf(buf, len, s->folder->root, s->folder->paths[i]);
    } else if (s->set) {
        int64_t k = 0;
        sl__recfile_describe(sl__recset_locate(s->set, i, &k), k, buf, len);
    } else {
        uint64_t k;
        int sh = find_shard(s, i, &k);
        const sl__shard_entry_t *e = sl__shard_entry(s->shards[sh], k);
        snprintf(buf, len, "%s: record %llu (%s)",
                 sl__shard_path(s->shards[sh]), (unsigned long long)k,
                 e->name ? e->name : "");
    }
    sl__msg_escape(buf, len); /* names from outside go to a terminal */
    return buf;
}

int64_t sl__source_file_count(const sl__source_t *s)
{
    if (s->set)
        return s->set->nfiles;
    return s->folder ? s->folder->n : s->nshards;
}

const char *sl__source_file_path(const sl__source_t *s, int64_t k, char *buf,
                                 size_t len)
{
    if (k < 0 || k >= sl__source_file_count(s))
        return NULL;
    int n =
        s->folder
            ? sl__path_join_buf(buf, len, s->folder->root, s->folder->paths[k])
        : s->set
            ? snprintf(buf, len, "%s", sl__bytesrc_name(s->set->files[k]->src))
            : snprintf(buf, len, "%s", sl__shard_path(s->shards[k]));
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

/* A file of an ImageFolder: opened, admitted and sized; the caller reads
 * rd->len bytes from offset 0 into rd->dst. */
static int file_begin(const char *root, const char *rel, sl__bytes_t *out,
                      const sl__admit_t *admit, sl__source_rd_t *rd, char *err,
                      size_t errlen)
{
    char path[PATH_MAX];
    int n = sl__path_join_buf(path, sizeof path, root, rel);
    if (n < 0 || (size_t)n >= sizeof path) /* never a cut path's file */
        return sl__fail(err, errlen, SL_EIO, "%s/%s: cannot open: %s", root,
                        rel, strerror(ENAMETOOLONG));
    /* The scan took regular files only, but the file may have been swapped
     * since (for a FIFO, a folder, a device): refused, never waited on. */
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    int rc = 0;
    char why[256];
    if ((rc = sl__admit(admit, size + 1, why, sizeof why))) {
        sl__fail(err, errlen, rc, "%s: %s", path, why);
    } else if ((rc = sl__bytes_reserve(out, (size_t)size + 1))) {
        sl__fail(err, errlen, rc, "%s: out of memory (%lld bytes)", path,
                 (long long)size);
    }
    if (rc) {
        close(fd);
        return rc;
    }
    rd->fd = fd;
    rd->own_fd = 1;
    rd->dst = out->p;
    rd->len = (size_t)size;
    rd->off = 0;
    return 0;
}

/* The rest of a file after `got` bytes (a short read), then closed. */
static int file_end(const char *root, const char *rel, sl__source_rd_t *rd,
                    int64_t res, sl__bytes_t *out, uint64_t *stored, char *err,
                    size_t errlen)
{
    int rc = 0, e = res < 0 ? (int)-res : 0;
    size_t got = res > 0 ? (size_t)res : 0;
    while (!e && got < rd->len) {
        ssize_t r = pread(rd->fd, rd->dst + got, rd->len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            e = r < 0 ? errno : 0;
            break;
        }
        got += (size_t)r;
    }
    if (e || got < rd->len)
        rc = sl__fail(err, errlen, e ? sl__errno_code(e, SL_EIO) : SL_EIO,
                      "%s/%s: read failed: %s", root, rel,
                      e ? strerror(e) : "file shrank");
    out->n = got;
    if (stored)
        *stored = got;
    close(rd->fd);
    rd->fd = -1;
    rd->own_fd = 0;
    return rc;
}

int sl__source_read(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                    sl__bytes_t *scratch, uint64_t *stored, char *err,
                    size_t errlen)
{
    return sl__source_read_admit(s, i, out, scratch, NULL, stored, err, errlen);
}

int sl__source_read_admit(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                          sl__bytes_t *scratch, const sl__admit_t *admit,
                          uint64_t *stored, char *err, size_t errlen)
{
    sl__source_rd_t rd;
    if (stored)
        *stored = 0;
    int rc = sl__source_read_begin(s, i, out, scratch, admit, &rd, err, errlen);
    if (rc)
        return rc;
    int64_t res = 0;
    char why[1024] = "";
    if (rd.len && rd.remote) { /* one ranged request, retried */
        int rrc =
            sl__remote_read(rd.remote, rd.off, rd.dst, rd.len, why, sizeof why);
        res = rrc ? rrc : (int64_t)rd.len;
        rd.why = why;
    } else if (rd.len) { /* _end reads the rest of a short read */
        ssize_t r;
        do
            r = pread(rd.fd, rd.dst, rd.len, (off_t)rd.off);
        while (r < 0 && errno == EINTR);
        res = r < 0 ? -errno : r;
    }
    return sl__source_read_end(s, &rd, res, out, scratch, stored, err, errlen);
}

static int read_begin(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                      sl__bytes_t *scratch, const sl__admit_t *admit,
                      sl__source_rd_t *rd, char *err, size_t errlen)
{
    memset(rd, 0, sizeof *rd);
    rd->fd = -1;
    rd->i = i;
    if (i < 0 || i >= sl__source_count(s))
        return sl__fail(err, errlen, SL_ERANGE, "%s: no sample %lld", s->path,
                        (long long)i);
    if (s->folder)
        return file_begin(s->folder->root, s->folder->paths[i], out, admit, rd,
                          err, errlen);
    if (s->set) { /* a file's read here, whole; a URL's handed out */
        int64_t k = 0;
        const sl__recfile_t *f = sl__recset_locate(s->set, i, &k);
        sl__recfile_io_t io;
        int rc = sl__recfile_read_begin(f, k, out, admit, &io, err, errlen);
        rd->remote = io.remote;
        rd->dst = io.dst;
        rd->len = io.len;
        rd->off = io.off;
        return rc;
    }
    uint64_t k;
    int sh = find_shard(s, i, &k);
    /* A record with a bad label (let through at open under skip). */
    int rc =
        sl__shard_label_check(s->shards[sh], k, s->label_classes, err, errlen);
    sl__shard_io_t io;
    if (!rc)
        rc = sl__shard_read_begin(s->shards[sh], k, out, scratch, admit, &io,
                                  err, errlen);
    if (rc)
        return rc;
    rd->fd = io.fd;
    rd->remote = io.remote;
    rd->dst = io.dst;
    rd->len = io.done ? 0 : io.len;
    rd->off = io.off;
    return 0;
}

static int read_end(const sl__source_t *s, sl__source_rd_t *rd, int64_t res,
                    sl__bytes_t *out, sl__bytes_t *scratch, uint64_t *stored,
                    char *err, size_t errlen)
{
    int64_t i = rd->i;
    if (s->set) {
        int64_t k = 0;
        const sl__recfile_t *f = sl__recset_locate(s->set, i, &k);
        return sl__recfile_read_end(f, k, out, rd->len ? res : 0, rd->why,
                                    stored, err, errlen);
    }
    if (s->folder)
        return file_end(s->folder->root, s->folder->paths[i], rd, res, out,
                        stored, err, errlen);
    uint64_t k;
    int sh = find_shard(s, i, &k);
    if (rd->len == 0) /* in memory, or an empty record: all there */
        res = 0;
    return sl__shard_read_end(s->shards[sh], k, out, scratch,
                              rd->fd < 0 && !rd->remote ? 0 : res, rd->why,
                              stored, err, errlen);
}

/* A read's failure names the file or record: its control bytes escaped. */
int sl__source_read_begin(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                          sl__bytes_t *scratch, const sl__admit_t *admit,
                          sl__source_rd_t *rd, char *err, size_t errlen)
{
    int rc = read_begin(s, i, out, scratch, admit, rd, err, errlen);
    if (rc)
        sl__msg_escape(err, errlen);
    return rc;
}

int sl__source_read_end(const sl__source_t *s, sl__source_rd_t *rd, int64_t res,
                        sl__bytes_t *out, sl__bytes_t *scratch,
                        uint64_t *stored, char *err, size_t errlen)
{
    int rc = read_end(s, rd, res, out, scratch, stored, err, errlen);
    if (rc)
        sl__msg_escape(err, errlen);
    return rc;
}

int sl__source_where(const sl__source_t *s, int64_t i, const void **obj,
                     uint64_t *off, uint64_t *len)
{
    if (i < 0 || i >= sl__source_count(s) || s->folder)
        return 0;
    if (s->set) {
        int64_t k = 0;
        const sl__recfile_t *f = sl__recset_locate(s->set, i, &k);
        if (!f || sl__recfile_bad(f, k) || !sl__bytesrc_remote(f->src))
            return 0;
        *obj = sl__bytesrc_remote(f->src);
        *off = f->recs[k].off;
        *len = f->recs[k].len;
        return *len > 0;
    }
    uint64_t k;
    int sh = find_shard(s, i, &k);
    if (!sl__shard_remote(s->shards[sh]))
        return 0;
    const sl__shard_entry_t *e = sl__shard_entry(s->shards[sh], k);
    *obj = sl__shard_remote(s->shards[sh]);
    *off = e->offset;
    *len = e->stored_size;
    return *len > 0;
}

int sl__source_read_holds_fd(const sl__source_t *s)
{
    return s->folder != NULL || sl__source_reads_remote(s);
}

int sl__source_reads_remote(const sl__source_t *s)
{
    if (s->set) {
        for (int k = 0; k < s->set->nfiles; k++)
            if (sl__bytesrc_is_remote(s->set->files[k]->src))
                return 1;
        return 0;
    }
    if (s->folder)
        return 0;
    for (int k = 0; k < s->nshards; k++)
        if (sl__shard_is_remote(s->shards[k]))
            return 1;
    return 0;
}

int sl__source_note_count(const sl__source_t *s)
{
    if (s->set)
        return s->set->nnotes + s->set->nwarns;
    return s->folder ? s->folder->nnotes : s->nbad;
}

const char *sl__source_note(const sl__source_t *s, int i, int *lost)
{
    int n = sl__source_note_count(s);
    if (i < 0 || i >= n)
        return NULL;
    if (s->folder) {
        *lost = s->folder->notes[i].lost;
        return s->folder->notes[i].msg;
    }
    *lost = 1;
    if (s->set && i >= s->set->nnotes) {
        *lost = 0; /* a warning */
        return s->set->warns[i - s->set->nnotes];
    }
    return s->set ? s->set->notes[i] : s->bad[i];
}

const int64_t *sl__source_groups(const sl__source_t *s, int *n)
{
    *n = s->set ? s->set->nfiles : s->folder ? 0 : s->nshards;
    return s->set ? s->set->first : s->folder ? NULL : s->first;
}

const char *sl__source_format(const sl__source_t *s)
{
    if (s->set)
        return sl__recset_format_name(s->set->fmt);
    return s->folder ? "imagefolder" : "sluice shards";
}
