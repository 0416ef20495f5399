/* data/shard_out: a run of shards written into one folder (what `sluice
 * pack` and `pack --text` write; see shard_out.h). */
#include "data/shard_out.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "codec/codec.h"

int sl__pack_out_classes(const sl__pack_out_t *o, char *const *names, int n,
                         char *err, size_t errlen)
{
    const char *out_dir = o->dir;
    char *path = NULL, *tmp = NULL;
    if (asprintf(&path, "%s/classes.txt", out_dir) < 0)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (asprintf(&tmp, "%s/.classes.txt.tmp-%ld", out_dir, (long)getpid()) <
        0) {
        free(path);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", tmp,
                      strerror(errno));
        goto done;
    }
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s\n", names[i]);
    int ok = !ferror(fp) && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", path,
                      strerror(errno));
        unlink(tmp);
    }
done:
    free(path);
    free(tmp);
    return rc;
}

/* Counts shard-NNNNN.sls files in out_dir; removes those numbered >= first
 * when first >= 0 (shards an earlier, larger pack left behind). */
static int scan_shards(const char *out_dir, long first)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned long n;
        int end = 0;
        if (sscanf(e->d_name, "shard-%5lu.sls%n", &n, &end) != 1 ||
            end != (int)strlen(e->d_name))
            continue;
        found++;
        if (first >= 0 && (long)n >= first) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", out_dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    return found;
}

int sl__pack_out_begin(sl__pack_out_t *o, char *err, size_t errlen)
{
    if (mkdir(o->dir, 0755) && errno != EEXIST)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", o->dir,
                        strerror(errno));
    int old = scan_shards(o->dir, -1);
    if (old && !o->force)
        return sl__fail(err, errlen, SL_ESTATE,
                        "%s already holds %d shard(s); use --force to replace "
                        "them",
                        o->dir, old);
    return 0;
}

void sl__pack_out_tidy(const sl__pack_out_t *o)
{
    if (o->force)
        scan_shards(o->dir, o->shards);
}

int sl__pack_out_finish(sl__pack_out_t *o, char *err, size_t errlen)
{
    if (!o->w)
        return 0;
    o->bytes_out += sl__shard_writer_bytes(o->w);
    int rc = sl__shard_writer_finish(o->w, err, errlen);
    o->w = NULL;
    return rc;
}

void sl__pack_out_abort(sl__pack_out_t *o)
{
    if (o->w)
        sl__shard_writer_abort(o->w);
    o->w = NULL;
}

int sl__pack_out_add(sl__pack_out_t *o, const void *p, size_t n, int64_t label,
                     const char *name, int *fatal, char *err, size_t errlen)
{
    *fatal = 1;
    if (o->w && sl__shard_writer_count(o->w) > 0 &&
        sl__shard_writer_bytes(o->w) +
                sl__shard_record_cost(o->codec, n, name) >
            (uint64_t)o->shard_size) {
        int rc = sl__pack_out_finish(o, err, errlen);
        if (rc)
            return rc;
    }
    if (!o->w) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/shard-%05ld.sls", o->dir,
                     o->shards) >= (int)sizeof path)
            return sl__fail(err, errlen, SL_EINVAL, "%s: path too long",
                            o->dir);
        int rc = sl__shard_writer_open(path, o->codec, &o->w, err, errlen);
        if (rc)
            return rc;
        o->shards++;
    }
    int rc = sl__shard_writer_add(o->w, p, n, label, name, err, errlen);
    *fatal = rc != SL_EINVAL && rc != SL_ERANGE;
    return rc;
}
