#include "recset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "brace.h"
#include "remote.h"
#include "remote_parse.h"
#include "tfrecord.h"

/* Whether the n bytes at s end with suffix (any case). */
static int ends_with_n(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && !strncasecmp(s + n - m, suffix, m);
}

/* The format of one file by its first bytes. */
static int sniff(const char *path)
{
    struct stat st;
    if (!sl__remote_is_url(path) && (stat(path, &st) || !S_ISREG(st.st_mode)))
        return 0;
    sl__bytesrc_t *src;
    char err[256];
    if (sl__bytesrc_open_file(path, &src, err, sizeof err))
        return 0;
    uint8_t h[512];
    uint64_t size = sl__bytesrc_size(src), len;
    int fmt = 0;
    if (size >= sizeof h &&
        !sl__bytesrc_read(src, 0, h, sizeof h, err, sizeof err) &&
        !memcmp(h + 257, "ustar", 5))
        fmt = SL__FMT_WDS;
    else if (size >= SL__TFRECORD_HEAD &&
             !sl__bytesrc_read(src, 0, h, SL__TFRECORD_HEAD, err, sizeof err) &&
             !sl__tfrecord_head_check(h, &len))
        fmt = SL__FMT_TFRECORD;
    sl__bytesrc_close(src);
    return fmt;
}

/* By the name's end: at an http(s) URL, the path's (a signed URL's query
 * follows it). */
static int by_name(const char *spec)
{
    /* The name's first n bytes, looked at in place: no copy on the stack,
     * which may be 32 KB in all (ulimit -s 32). */
    size_t n = strlen(spec);
    if (sl__remote_is_url(spec) && strncasecmp(spec, "s3://", 5))
        n = strcspn(spec, "?#");
    if (ends_with_n(spec, n, ".tar"))
        return SL__FMT_WDS;
    if (ends_with_n(spec, n, ".tfrecord") ||
        ends_with_n(spec, n, ".tfrecords") || ends_with_n(spec, n, ".tfrec"))
        return SL__FMT_TFRECORD;
    return 0;
}

int sl__recset_is_listing(const char *spec)
{
    size_t n = strlen(spec);
    return !strncasecmp(spec, "s3://", 5) && n > 5 && spec[n - 1] == '/' &&
           !sl__brace_has(spec);
}

int sl__recset_names(const char *spec, char ***names, int *n, char *err,
                     size_t errlen)
{
    if (!sl__recset_is_listing(spec))
        return sl__brace_expand(spec, names, n, err, errlen);
    int rc = sl__remote_list(spec, names, n, err, errlen);
    if (!rc && *n == 0)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no objects under it",
                      spec);
    return rc;
}

/* The format of a listing: that of its first object named as a shard of
 * either format. */
static int listed(const char *spec)
{
    char **v, err[256];
    int n, fmt = 0;
    if (sl__recset_names(spec, &v, &n, err, sizeof err))
        return 0;
    for (int i = 0; i < n && !fmt; i++)
        fmt = by_name(v[i]);
    sl__strv_free(v, n);
    return fmt;
}

int sl__recset_format(const char *spec, const char **files)
{
    *files = spec;
    static const struct {
        const char *prefix;
        int fmt;
    } prefixes[] = {{"webdataset:", SL__FMT_WDS},
                    {"wds:", SL__FMT_WDS},
                    {"tfrecord:", SL__FMT_TFRECORD}};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t n = strlen(prefixes[i].prefix);
        if (!strncmp(spec, prefixes[i].prefix, n)) {
            *files = spec + n;
            return prefixes[i].fmt;
        }
    }
    if (sl__recset_is_listing(spec))
        return listed(spec);
    if (!sl__brace_has(spec))
        return by_name(spec) ? by_name(spec) : sniff(spec);
    char **v, err[256];
    int n, fmt = 0;
    if (sl__brace_expand(spec, &v, &n, err, sizeof err))
        return by_name(spec); /* the open gives the expansion's error */
    if (n > 0)
        fmt = by_name(v[0]) ? by_name(v[0]) : sniff(v[0]);
    sl__strv_free(v, n);
    return fmt;
}

const char *sl__recset_format_name(int fmt)
{
    return fmt == SL__FMT_WDS        ? "webdataset"
           : fmt == SL__FMT_TFRECORD ? "tfrecord"
                                     : "?";
}

static int note(sl__recset_t *r, const char *msg, const char *what)
{
    return sl__msg_list_add(&r->notes, &r->nnotes, msg, what);
}

/* Files at URLs are opened by up to OPEN_PAR threads at once: an open is
 * a few round trips (the file's size; its sidecar), so 7
 * shards over a 10 ms link took 0.24 s one after another, a sixth of the
 * first epoch. The results are taken in file order, so what the set holds
 * and which error it reports do not depend on the threads. Local files are
 * opened in order (a walk of each: parallel walks would make a disk seek). */
enum { OPEN_PAR = 16 };

typedef struct {
    char **names;
    int n, fmt, skip_bad;
    atomic_int next;
    sl__recfile_t **f;
    int *rc;
    char **msg; /* a failed open's message (NULL: none could be kept) */
} opener_t;

static void open_one(opener_t *o, int i)
{
    char err[1024] = "";
    o->rc[i] = sl__recfile_open(o->names[i], o->fmt, o->skip_bad, &o->f[i], err,
                                sizeof err);
    if (o->rc[i])
        o->msg[i] = strdup(err);
}

static void *opener(void *arg)
{
    opener_t *o = arg;
    for (int i; (i = atomic_fetch_add(&o->next, 1)) < o->n;)
        open_one(o, i);
    return NULL;
}

/* Opens names[0..n) into o (allocated here; 0, or SL_ENOMEM). */
static int open_all(char **names, int n, int fmt, int skip_bad, opener_t *o)
{
    *o = (opener_t){.names = names, .n = n, .fmt = fmt, .skip_bad = skip_bad};
    atomic_init(&o->next, 0);
    o->f = calloc((size_t)n + 1, sizeof *o->f);
    o->rc = calloc((size_t)n + 1, sizeof *o->rc);
    o->msg = calloc((size_t)n + 1, sizeof *o->msg);
    if (!o->f || !o->rc || !o->msg)
        return SL_ENOMEM;
    int par = n > 1 && sl__remote_is_url(names[0]) ? n : 1;
    if (par > OPEN_PAR)
        par = OPEN_PAR;
    pthread_t th[OPEN_PAR];
    int started = 0;
    while (started < par - 1 && !pthread_create(&th[started], NULL, opener, o))
        started++;
    opener(o); /* this thread too; alone where no thread could start */
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    return 0;
}

/* What was not taken: files the set does not hold, messages. */
static void open_free(opener_t *o)
{
    for (int i = 0; i < o->n; i++) {
        if (o->f)
            sl__recfile_close(o->f[i]);
        if (o->msg)
            free(o->msg[i]);
    }
    free(o->f);
    free(o->rc);
    free(o->msg);
}

int sl__recset_open(const char *spec, int skip_bad, sl__recset_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    const char *files;
    int fmt = sl__recset_format(spec, &files);
    if (!fmt)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: not WebDataset (.tar) or TFRecord (.tfrecord) "
                        "files; name the format: webdataset:%s or "
                        "tfrecord:%s",
                        spec, spec, spec);
    sl__recset_t *r = calloc(1, sizeof *r);
    if (!r)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    r->fmt = fmt;
    r->max_label = -1;
    char **names = NULL;
    int n = 0;
    int rc = sl__recset_names(files, &names, &n, err, errlen);
    if (!rc && sl__recset_is_listing(files)) { /* the objects of fmt */
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (by_name(names[i]) == fmt)
                names[m++] = names[i];
            else
                free(names[i]);
        }
        names[m] = NULL;
        n = m;
    }
    if (!rc) {
        r->files = calloc((size_t)n, sizeof *r->files);
        r->first = calloc((size_t)n + 1, sizeof *r->first);
        if (!r->files || !r->first)
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    opener_t op = {0};
    if (!rc && open_all(names, n, fmt, skip_bad, &op))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int64_t total = 0;
    int nleft = 0;      /* files left out whole */
    char *first = NULL; /* the first one's cause */
    for (int i = 0; i < n && !rc; i++) {
        sl__recfile_t *f = op.f[i];
        op.f[i] = NULL;
        if ((rc = op.rc[i]))
            sl__fail(err, errlen, rc, "%s",
                     op.msg[i] ? op.msg[i] : "out of memory");
        if (rc && skip_bad && sl__err_is_data(rc) && rc != SL_ENOMEM) {
            rc = note(r, err, " (whole file left out)") ? SL_ENOMEM : 0;
            if (!nleft++ && !rc && !(first = strdup(err)))
                rc = SL_ENOMEM;
            continue;
        }
        if (rc)
            break;
        r->files[r->nfiles] = f;
        r->first[r->nfiles++] = total;
        total += f->n;
        if (f->damage && note(r, f->damage, " (the rest of the file lost)"))
            rc = SL_ENOMEM;
        if (f->sidecar_note &&
            sl__msg_list_add(&r->warns, &r->nwarns, f->sidecar_note,
                             " (sidecar index not used: the file was walked)"))
            rc = SL_ENOMEM;
        for (int64_t k = 0; k < f->n; k++)
            if (f->recs[k].label > r->max_label)
                r->max_label = f->recs[k].label;
    }
    open_free(&op);
    if (r->first)
        r->first[r->nfiles] = total;
    if (rc == SL_ENOMEM)
        sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    /* Nothing left to read: the causes go in the message, since no
     * skipped: list will be printed for a set that did not open. A
     * pattern of URLs is named with its secrets hidden. */
    char *shown = NULL;
    if (!rc && (total == 0 || r->max_label < 0) &&
        !(shown = strstr(spec, "://") ? sl__remote_redact(spec) : strdup(spec)))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (shown && nleft)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no readable samples: %d of %d files left out; "
                      "the first: %s",
                      shown, nleft, n, first);
    else if (shown && r->nnotes)
        rc = sl__fail(err, errlen, SL_ENOTFOUND,
                      "%s: no readable samples; the first problem: %s", shown,
                      r->notes[0]);
    else if (shown)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no readable samples",
                      shown);
    free(shown);
    free(first);
    sl__strv_free(names, n);
    if (rc) {
        sl__recset_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void sl__recset_close(sl__recset_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nfiles; i++)
        sl__recfile_close(r->files[i]);
    free(r->files);
    free(r->first);
    sl__strv_free(r->notes, r->nnotes);
    sl__strv_free(r->warns, r->nwarns);
    free(r);
}

int64_t sl__recset_count(const sl__recset_t *r)
{
    return r->first[r->nfiles];
}

const sl__recfile_t *sl__recset_locate(const sl__recset_t *r, int64_t i,
                                       int64_t *k)
{
    int lo = 0, hi = r->nfiles - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    *k = i - r->first[lo];
    return r->files[lo];
}
