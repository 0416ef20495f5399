/* data/pack_dir: a pack folder opened and checked (see pack_dir.h). */
#include "pack_dir.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "data/manifest.h"
#include "data/shard_walk.h"

#define SL__REPACK "re-pack it"

int sl__pack_dir_holds(const char *dir)
{
    char **paths = NULL;
    int n = 0;
    if (sl__shard_list(dir, &paths, &n) == 0 && n > 0) {
        sl__shard_list_free(paths, n);
        return 1;
    }
    sl__shard_list_free(paths, n);
    char path[4096];
    struct stat st;
    sl__path_join_buf(path, sizeof path, dir, SL__MANIFEST_NAME);
    return stat(path, &st) == 0;
}

void sl__pack_dir_close(sl__pack_dir_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nshards; i++)
        sl__shard_close(p->shards[i]);
    free(p->shards);
    sl__strv_free(p->classes, p->nclasses);
    sl__strv_free(p->bad, p->nbad);
    memset(p, 0, sizeof *p);
    p->nclasses = -1;
}

/* A problem found: fails the open, or is kept in p->bad when the mode lets
 * it through (damage: a shard that cannot be opened; else the pack's
 * shape). @return 0 when kept, else the SL_E* code (message in err). */
static int problem(sl__pack_dir_t *p, int mode, int damage, int code, char *err,
                   size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static int problem(sl__pack_dir_t *p, int mode, int damage, int code, char *err,
                   size_t errlen, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (mode == SL__PACK_REPORT_ALL ||
        (damage && mode == SL__PACK_SKIP_DAMAGED)) {
        char **v = realloc(p->bad, (size_t)(p->nbad + 1) * sizeof *v);
        if (!v || !(v[p->nbad] = strdup(msg))) {
            if (v)
                p->bad = v;
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        }
        p->bad = v;
        p->nbad++;
        p->nunreadable += damage;
        return 0;
    }
    return sl__fail(err, errlen, code, "%s", msg);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The numbered shard name shard-NNNNN.sls (at least 5 digits, written as
 * "%05lu"): its number, or -1. */
static long shard_number(const char *name)
{
    unsigned long k;
    int end = 0;
    if (sscanf(name, "shard-%lu.sls%n", &k, &end) != 1 ||
        end != (int)strlen(name) || k > 0x7fffffffUL)
        return -1;
    char canon[64];
    snprintf(canon, sizeof canon, "shard-%05lu.sls", k);
    return strcmp(canon, name) ? -1 : (long)k;
}

typedef struct numbered {
    long k;
    const char *path;
} numbered_t;

static int cmp_numbered(const void *a, const void *b)
{
    long x = ((const numbered_t *)a)->k, y = ((const numbered_t *)b)->k;
    return (x > y) - (x < y);
}

/* Order of an older pack (no manifest): its shards by number; a gap or a
 * *.sls without a number is a problem. order[] gets the paths. */
static int order_numbered(sl__pack_dir_t *p, const char *dir, int mode,
                          char **paths, int n, const char **order, int *norder,
                          char *err, size_t errlen)
{
    numbered_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int nv = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        long k = shard_number(base_name(paths[i]));
        if (k >= 0)
            v[nv++] = (numbered_t){k, paths[i]};
        else
            rc = problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                         "%s: %s is not a shard-NNNNN.sls of a pack, and "
                         "there is no %s to say what belongs: remove it, "
                         "or " SL__REPACK,
                         dir, base_name(paths[i]), SL__MANIFEST_NAME);
    }
    qsort(v, (size_t)nv, sizeof *v, cmp_numbered);
    long want = 0;
    for (int i = 0; i < nv && !rc; i++, want++) {
        if (v[i].k != want)
            rc = problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                         "%s: shard-%05ld.sls is missing (found shards up to "
                         "shard-%05ld.sls, and no %s): an unfinished or "
                         "mixed pack; " SL__REPACK,
                         dir, want, v[nv - 1].k, SL__MANIFEST_NAME);
        want = v[i].k;
    }
    for (int i = 0; i < nv; i++)
        order[i] = v[i].path;
    *norder = nv;
    free(v);
    return rc;
}

/* Order of a pack with a manifest: the manifest's; every *.sls of the
 * folder must be in it and every shard it lists in the folder. order[k]
 * is NULL for a missing one. */
static int order_manifest(sl__pack_dir_t *p, const char *dir, int mode,
                          const sl__manifest_t *m, char **paths, int n,
                          char **order, char *err, size_t errlen)
{
    char **names =
        malloc((size_t)(m->nshards ? m->nshards : 1) * sizeof *names);
    if (!names)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    for (int k = 0; k < m->nshards; k++)
        names[k] = m->shards[k].name;
    qsort(names, (size_t)m->nshards, sizeof *names, cmp_str);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const char *b = base_name(paths[i]);
        if (!bsearch(&b, names, (size_t)m->nshards, sizeof *names, cmp_str))
            rc = problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                         "%s: %s is not part of this pack (not in its %s): "
                         "left from another pack? Remove it, or " SL__REPACK,
                         dir, b, SL__MANIFEST_NAME);
    }
    free(names);
    for (int k = 0; k < m->nshards && !rc; k++) {
        char *path = sl__path_join(dir, m->shards[k].name);
        if (!path)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        if (bsearch(&path, paths, (size_t)n, sizeof *paths, cmp_str)) {
            order[k] = path;
            continue;
        }
        free(path);
        rc = problem(p, mode, 0, SL_ENOTFOUND, err, errlen,
                     "%s: %s is missing (its %s lists %d shards): an "
                     "unfinished or damaged pack; " SL__REPACK,
                     dir, m->shards[k].name, SL__MANIFEST_NAME, m->nshards);
    }
    return rc;
}

/* classes.txt against the manifest's line for it. */
static int check_classes(sl__pack_dir_t *p, const char *dir, int mode,
                         const sl__manifest_t *m, uint64_t sum, char *err,
                         size_t errlen)
{
    if (m->classes < 0 && p->nclasses >= 0)
        return problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                       "%s/classes.txt is not part of this pack (its %s "
                       "names no classes): remove it, or " SL__REPACK,
                       dir, SL__MANIFEST_NAME);
    if (m->classes >= 0 && p->nclasses < 0)
        return problem(p, mode, 0, SL_ENOTFOUND, err, errlen,
                       "%s/classes.txt is missing (its %s names %" PRId64
                       " classes); " SL__REPACK,
                       dir, SL__MANIFEST_NAME, m->classes);
    if (m->classes >= 0 && (p->nclasses != m->classes || sum != m->classes_sum))
        return problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                       "%s/classes.txt is not the one its %s names (%d "
                       "classes, checksum %016" PRIx64 "; the manifest says "
                       "%" PRId64 ", %016" PRIx64
                       "): from another pack, or edited since; " SL__REPACK,
                       dir, SL__MANIFEST_NAME, p->nclasses, sum, m->classes,
                       m->classes_sum);
    return 0;
}

/* Opens the shards of order[0..n-1] (NULL: missing, already reported)
 * into p, each checked against its manifest line when ms is given. */
static int open_all(sl__pack_dir_t *p, int mode, const char *dir,
                    const char *const *order, int n,
                    const sl__manifest_shard_t *ms, char *err, size_t errlen)
{
    p->shards = calloc((size_t)n + 1, sizeof *p->shards);
    if (!p->shards)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        if (!order[k])
            continue;
        sl__shard_t *sh = NULL;
        char msg[1024];
        int rc = sl__shard_open(order[k], &sh, msg, sizeof msg);
        if (rc) { /* a shard the system could not open is no damage */
            rc = problem(p, mode, sl__err_is_data(rc), rc, err, errlen, "%s",
                         msg);
            if (rc)
                return rc;
            continue;
        }
        if (ms && (sl__shard_size(sh) != ms[k].bytes ||
                   sl__shard_count(sh) != ms[k].records ||
                   sl__shard_digest(sh) != ms[k].digest)) {
            rc = problem(p, mode, 0, SL_ECORRUPT, err, errlen,
                         "%s: not the shard its folder's %s lists (%" PRIu64
                         " bytes, %" PRIu64 " records, checksum %016" PRIx64
                         "; listed: %" PRIu64 ", %" PRIu64 ", %016" PRIx64
                         "): from another pack, or changed since; " SL__REPACK,
                         order[k], SL__MANIFEST_NAME, sl__shard_size(sh),
                         sl__shard_count(sh), sl__shard_digest(sh), ms[k].bytes,
                         ms[k].records, ms[k].digest);
            if (rc) {
                sl__shard_close(sh);
                return rc;
            }
        }
        p->shards[p->nshards++] = sh;
    }
    (void)dir;
    return 0;
}

int sl__pack_dir_open(const char *dir, int mode, sl__pack_dir_t *p, char *err,
                      size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->nclasses = -1;
    char **paths = NULL;
    int n = 0;
    if (sl__shard_list(dir, &paths, &n))
        return sl__fail(err, errlen, SL_EIO, "%s: cannot list: %s", dir,
                        strerror(errno));
    char msg[2048];
    sl__manifest_t m;
    int rc = 0, mrc = sl__manifest_read(dir, &m, msg, sizeof msg);
    if (mrc && mrc != SL_ENOTFOUND)
        rc = problem(p, mode, 0, mrc, err, errlen, "%s", msg);
    p->manifest = mrc == 0;
    uint64_t sum = 0;
    int crc = rc ? 0
                 : sl__classes_read(dir, &p->classes, &p->nclasses, &sum, msg,
                                    sizeof msg);
    if (crc) {
        p->classes = NULL;
        p->nclasses = -1;
        if (crc != SL_ENOTFOUND)
            rc = problem(p, mode, 0, crc, err, errlen, "%s", msg);
    }
    if (!rc && p->manifest)
        rc = check_classes(p, dir, mode, &m, sum, err, errlen);
    int norder = p->manifest ? m.nshards : n;
    char **order = calloc((size_t)norder + 1, sizeof *order);
    if (!rc && !order)
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (!rc && p->manifest)
        rc = order_manifest(p, dir, mode, &m, paths, n, order, err, errlen);
    else if (!rc)
        rc = order_numbered(p, dir, mode, paths, n, (const char **)order,
                            &norder, err, errlen);
    if (!rc && norder == 0 && !p->manifest)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no shards", dir);
    if (!rc)
        rc = open_all(p, mode, dir, (const char *const *)order, norder,
                      p->manifest ? m.shards : NULL, err, errlen);
    if (order && p->manifest)
        for (int k = 0; k < m.nshards; k++)
            free(order[k]); /* the manifest's own paths; others are paths[] */
    free(order);
    if (p->manifest)
        sl__manifest_free(&m);
    sl__shard_list_free(paths, n);
    if (rc)
        sl__pack_dir_close(p);
    return rc;
}
