/* cli/pack_out: the --codec / --shard-size / --force options, the output folder
 * (refusing or replacing old shards, classes.txt) and the rolling shard
 * output shared by the pack commands. */
#include "pack_out.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "codec/codec.h"

static const char *const codecs[] = {"none", "lz4", "zstd", NULL};
static const int codec_v[] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD};

#define F(f) offsetof(sl__pack_out_t, f)
const sl__opt_t sl__pack_out_opts[] = {
    {"codec", 0, SL__OPT_CHOICE, F(codec), 0, 0, NULL, "how records are stored",
     NULL, codecs, codec_v},
    {"shard-size", 0, SL__OPT_SIZE, F(shard_size), 1, HUGE_VAL, "SIZE",
     "largest shard, e.g. 64M, 1G", "256M"},
    {"force", 0, SL__OPT_FLAG, F(force), 0, 0, NULL,
     "write into an OUT that already holds shards (replaced; those left over "
     "are removed)"},
    {NULL},
};

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

int sl__pack_out_begin(sl__pack_out_t *o, const char *who)
{
    if (mkdir(o->dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "%s: %s: cannot create: %s\n", who, o->dir,
                strerror(errno));
        return -1;
    }
    int old = scan_shards(o->dir, -1);
    if (old && !o->force) {
        fprintf(stderr,
                "%s: %s already holds %d shard(s); use --force to replace "
                "them\n",
                who, o->dir, old);
        return -1;
    }
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
