#include "ext_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "data/recfile.h"
#include "data/recidx.h"
#include "data/tfrecord.h"
#include "sluice/version.h"

#define BLOCK 512

static const char *file_name(const sl__ext_out_t *o, long k, char *buf,
                             size_t len)
{
    if (o->fmt == SL__FMT_WDS)
        snprintf(buf, len, "shard-%06ld.tar", k);
    else
        snprintf(buf, len, "data-%05ld.tfrecord", k);
    return buf;
}

static int put(sl__ext_out_t *o, const void *p, size_t n, char *err,
               size_t errlen)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, (const uint8_t *)p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return sl__fail(err, errlen, sl__errno_code(errno, SL_EIO),
                            "%s: write failed: %s", o->tmp, strerror(errno));
        done += (size_t)w;
    }
    o->cur += n;
    return 0;
}

int sl__ext_out_begin(sl__ext_out_t *o, char *err, size_t errlen)
{
    o->fd = -1;
    if (o->fmt == SL__FMT_TFRECORD && !SL_HAVE_TFRECORD)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "sluice was built without TFRecord support "
                        "(protobuf-c)");
    int made = sl__mkdir_made(o->dir, 0777); /* and those above, mkdir -p */
    if (made == 1) {
        o->made_dir = 1;
    } else if (made < 0) {
        return sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", o->dir,
                        strerror(errno));
    } else {
        DIR *d = opendir(o->dir);
        if (!d)
            return sl__fail(err, errlen, SL_EIO, "%s: %s", o->dir,
                            strerror(errno));
        struct dirent *e;
        int other = 0;
        while ((e = readdir(d)))
            other |= strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        closedir(d);
        if (other)
            return sl__fail(err, errlen, SL_ESTATE,
                            "%s: not empty (WebDataset and TFRecord output "
                            "goes into a new or empty folder)",
                            o->dir);
    }
    sl__bytes_t *b = calloc(1, sizeof *b);
    if (!b)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    o->scratch = b;
    return 0;
}

/* The finished file's sidecar index (data/recidx): the file indexed as a
 * reader indexes it, so the sidecar holds what a walk finds. */
static int write_index(const sl__ext_out_t *o, const char *path, char *err,
                       size_t errlen)
{
    sl__recfile_t *f;
    int rc = sl__recfile_walk(path, o->fmt, &f, err, errlen);
    if (!rc)
        rc = sl__recidx_save(f, path, err, errlen);
    sl__recfile_close(f);
    return rc;
}

/* Closes the open file, gives it its name and writes its index. */
static int finish_file(sl__ext_out_t *o, char *err, size_t errlen)
{
    if (o->fd < 0)
        return 0;
    int rc = 0;
    if (o->fmt == SL__FMT_WDS) { /* end of archive: two zero blocks */
        uint8_t z[2 * BLOCK] = {0};
        rc = put(o, z, sizeof z, err, errlen);
    }
    if (!rc && fsync(o->fd))
        rc = sl__fail(err, errlen, SL_EIO, "%s: fsync: %s", o->tmp,
                      strerror(errno));
    close(o->fd);
    o->fd = -1;
    char name[64], *final = NULL;
    file_name(o, o->files - 1, name, sizeof name);
    if (!rc && !(final = sl__path_join(o->dir, name)))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (!rc && rename(o->tmp, final))
        rc = sl__fail(err, errlen, SL_EIO, "%s: rename: %s", final,
                      strerror(errno));
    if (rc)
        unlink(o->tmp);
    else
        o->bytes_out += o->cur;
    if (!rc)
        rc = write_index(o, final, err, errlen);
    free(final);
    free(o->tmp);
    o->tmp = NULL;
    return rc;
}

static int start_file(sl__ext_out_t *o, char *err, size_t errlen)
{
    char name[64], tmp[72];
    snprintf(tmp, sizeof tmp, ".%s.tmp",
             file_name(o, o->files, name, sizeof name));
    if (!(o->tmp = sl__path_join(o->dir, tmp)))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o->fd < 0)
        return sl__fail(err, errlen, SL_EIO, "%s: %s", o->tmp, strerror(errno));
    o->files++;
    o->cur = 0;
    return 0;
}

/* A ustar header for a regular file. */
static void tar_header(uint8_t h[BLOCK], const char *name, uint64_t size)
{
    memset(h, 0, BLOCK);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "00000000000", 12);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int k = 0; k < BLOCK; k++)
        sum += h[k];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static int tar_member(sl__ext_out_t *o, const char *name, const void *p,
                      size_t n, char *err, size_t errlen)
{
    uint8_t h[BLOCK], z[BLOCK] = {0};
    tar_header(h, name, n);
    int rc = put(o, h, BLOCK, err, errlen);
    if (!rc)
        rc = put(o, p, n, err, errlen);
    if (!rc && n % BLOCK)
        rc = put(o, z, BLOCK - n % BLOCK, err, errlen);
    return rc;
}

static int is_png(const char *name)
{
    size_t n = strlen(name);
    return n >= 4 && !strcasecmp(name + n - 4, ".png");
}

int sl__ext_out_add(sl__ext_out_t *o, const void *p, size_t n, int64_t label,
                    const char *name, char *err, size_t errlen)
{
    sl__bytes_t *ex = o->scratch;
    const char *fmt = is_png(name) ? "png" : "jpeg";
    uint64_t need;
    if (o->fmt == SL__FMT_WDS) {
        need = 3 * BLOCK + (n + BLOCK - 1) / BLOCK * BLOCK;
    } else {
        int rc = sl__tfexample_build(p, n, label, fmt, ex);
        if (rc)
            return sl__fail(err, errlen, rc, "%s",
                            rc == SL_ENOMEM ? "out of memory"
                                            : "built without TFRecord support");
        need = SL__TFRECORD_HEAD + ex->n + SL__TFRECORD_FOOT;
    }
    int rc = 0;
    if (o->fd >= 0 && o->cur > 0 && o->cur + need > (uint64_t)o->shard_size)
        rc = finish_file(o, err, errlen);
    if (!rc && o->fd < 0)
        rc = start_file(o, err, errlen);
    if (rc)
        return rc;
    if (o->fmt == SL__FMT_WDS) {
        char mname[64], cls[32];
        int cn = snprintf(cls, sizeof cls, "%lld", (long long)label);
        snprintf(mname, sizeof mname, "%09lld.%s", (long long)o->samples,
                 is_png(name) ? "png" : "jpg");
        rc = tar_member(o, mname, p, n, err, errlen);
        snprintf(mname, sizeof mname, "%09lld.cls", (long long)o->samples);
        if (!rc)
            rc = tar_member(o, mname, cls, (size_t)cn, err, errlen);
    } else {
        uint8_t h[SL__TFRECORD_HEAD], f[SL__TFRECORD_FOOT];
        sl__tfrecord_head(h, ex->n);
        sl__tfrecord_foot(f, ex->p, ex->n);
        rc = put(o, h, sizeof h, err, errlen);
        if (!rc)
            rc = put(o, ex->p, ex->n, err, errlen);
        if (!rc)
            rc = put(o, f, sizeof f, err, errlen);
    }
    if (!rc)
        o->samples++;
    return rc;
}

int sl__ext_out_commit(sl__ext_out_t *o, char *err, size_t errlen)
{
    int rc = finish_file(o, err, errlen);
    if (o->scratch)
        sl__bytes_free(o->scratch);
    free(o->scratch);
    o->scratch = NULL;
    return rc;
}

void sl__ext_out_abort(sl__ext_out_t *o)
{
    if (o->fd >= 0) {
        close(o->fd);
        o->fd = -1;
    }
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    /* each file and its sidecar, joined as finish_file and recidx named
     * them (one slash; a fixed buffer cut a long one, which then stayed) */
    char name[64], index[72];
    for (long k = 0; k < o->files; k++) {
        file_name(o, k, name, sizeof name);
        snprintf(index, sizeof index, "%s%s", name, SL__RECIDX_SUFFIX);
        char *path = sl__path_join(o->dir, name);
        if (path)
            unlink(path);
        free(path);
        path = sl__path_join(o->dir, index);
        if (path)
            unlink(path);
        free(path);
    }
    if (o->made_dir)
        rmdir(o->dir);
    if (o->scratch)
        sl__bytes_free(o->scratch);
    free(o->scratch);
    o->scratch = NULL;
}
