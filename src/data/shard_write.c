/* data/shard_write: builds a shard in a temp file beside its final path and
 * renames it into place, so a reader never sees a half-written shard under
 * the final name, whatever happens to the writer. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "codec/codec.h"
#include "shard.h"
#include "shard_format.h"

struct sl__shard_writer {
    char *path; /* final name */
    char *tmp;  /* where bytes go until finish */
    int fd;
    int codec;
    int level;
    sl__codec_dict_t *dict; /* SL_CODEC_ZSTD_DICT: loaded to compress */
    uint32_t hsize;         /* header bytes: 64, or 88 with a dictionary */
    uint64_t dict_off, dict_sum;
    uint32_t dict_n;
    int failed;        /* an I/O error happened: the file is unusable */
    uint64_t off;      /* end of the data region so far */
    uint64_t count;    /* records */
    sl__bytes_t index; /* encoded entries */
    sl__bytes_t names; /* name table */
    sl__bytes_t comp;  /* compression scratch */
};

static int write_at(int fd, const void *p, size_t n, uint64_t off)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t r = pwrite(fd, b, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Appends n bytes to a growable buffer. */
static int bytes_append(sl__bytes_t *b, const void *p, size_t n)
{
    if (sl__bytes_reserve(b, b->n + n))
        return SL_ENOMEM;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

/* Fsyncs the folder holding path, so that the rename itself is durable. */
static int sync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int sl__shard_writer_open(const char *path, int codec, sl__shard_writer_t **out,
                          char *err, size_t errlen)
{
    sl__shard_codec_t c = {.codec = codec};
    return sl__shard_writer_open_ex(path, &c, out, err, errlen);
}

int sl__shard_writer_open_ex(const char *path, const sl__shard_codec_t *c,
                             sl__shard_writer_t **out, char *err, size_t errlen)
{
    static atomic_uint serial;
    *out = NULL;
    int codec = c->codec;
    if (codec < SL_CODEC_NONE || codec > SL__CODEC_LAST)
        return sl__fail(err, errlen, SL_EINVAL, "%s: unknown codec %d", path,
                        codec);
    if (codec == SL_CODEC_ZSTD_DICT && (!c->dict || !c->dict_n))
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: codec zstd-dict needs a dictionary", path);
    sl__shard_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path)))
        goto nomem;
    w->fd = -1;
    w->codec = codec;
    w->level = c->level;
    w->hsize = SL_SHARD_HEADER_SIZE;
    if (codec == SL_CODEC_ZSTD_DICT) {
        char cerr[160];
        int rc =
            sl__codec_dict_load(c->dict, c->dict_n, c->level > 0 ? c->level : 3,
                                &w->dict, cerr, sizeof cerr);
        if (rc) {
            sl__shard_writer_abort(w);
            return sl__fail(err, errlen, SL_EINVAL, "%s: dictionary: %s", path,
                            cerr);
        }
        w->hsize = SL_SHARD_HEADER_SIZE_DICT;
        w->dict_off = SL_SHARD_HEADER_SIZE_DICT;
        w->dict_n = (uint32_t)c->dict_n;
        w->dict_sum = XXH3_64bits(c->dict, c->dict_n);
    }
    /* The temp file sits in the same folder (rename must not cross file
     * systems); a dot name keeps it out of `*.sls` globs. O_EXCL with a
     * unique suffix instead of mkstemp, so that the mode honours umask. */
    char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    for (int attempt = 0; attempt < 100 && w->fd < 0; attempt++) {
        free(w->tmp);
        w->tmp = NULL;
        if (asprintf(&w->tmp, "%.*s.%s.tmp-%ld-%u", dirlen, path, base,
                     (long)getpid(), atomic_fetch_add(&serial, 1)) < 0) {
            w->tmp = NULL;
            goto nomem;
        }
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (w->fd < 0 && errno != EEXIST)
            break;
    }
    if (w->fd < 0) {
        int e = errno;
        sl__fail(err, errlen, SL_EIO, "%s: cannot create temp file %s: %s",
                 path, w->tmp ? w->tmp : "?", strerror(e));
        free(w->tmp);
        w->tmp = NULL; /* nothing of ours to remove */
        sl__shard_writer_abort(w);
        return SL_EIO;
    }
    /* A zero header until finish: a stray temp file never looks valid. The
     * dictionary, if any, opens the data region. */
    uint8_t zero[SL_SHARD_HEADER_SIZE_DICT] = {0};
    if (write_at(w->fd, zero, w->hsize, 0) ||
        (w->dict_n && write_at(w->fd, c->dict, w->dict_n, w->dict_off))) {
        int e = errno;
        sl__shard_writer_abort(w);
        return sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", path,
                        strerror(e));
    }
    w->off = w->hsize + w->dict_n;
    *out = w;
    return 0;
nomem:
    sl__shard_writer_abort(w);
    return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
}

uint64_t sl__shard_record_cost(int codec, size_t raw_n, const char *name)
{
    size_t bound = sl__codec_bound(codec, raw_n);
    return (uint64_t)(bound ? bound : raw_n) + SL_SHARD_ENTRY_SIZE +
           strlen(name) + 1;
}

int sl__shard_record_check(const char *path, const char *name, size_t n,
                           char *err, size_t errlen)
{
    size_t len = strlen(name);
    if (len > SL_SHARD_NAME_MAX)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s: record name longer than %d bytes: %.64s...", path,
                        SL_SHARD_NAME_MAX, name);
    for (size_t i = 0; i < len; i++)
        if (!sl__shard_name_byte_ok((unsigned char)name[i]))
            return sl__fail(err, errlen, SL_EINVAL,
                            "%s: record name has a control byte (0x%02x)", path,
                            (unsigned char)name[i]);
    if (n > UINT32_MAX)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s: record %s: %zu bytes is over the 4 GiB limit",
                        path, name, n);
    return 0;
}

int sl__shard_writer_add(sl__shard_writer_t *w, const void *raw, size_t n,
                         int64_t label, const char *name, char *err,
                         size_t errlen)
{
    if (!w || (!raw && n) || !name)
        return sl__fail(err, errlen, SL_EINVAL, "shard writer: bad argument");
    if (w->failed)
        return sl__fail(err, errlen, SL_ESTATE, "%s: an earlier write failed",
                        w->path);
    int rc = sl__shard_record_check(w->path, name, n, err, errlen);
    if (rc)
        return rc;
    size_t len = strlen(name);
    if (w->names.n + len + 1 > UINT32_MAX)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s: name table over 4 GiB; use smaller shards",
                        w->path);

    const void *stored = raw;
    size_t stored_n = n;
    int codec = SL_CODEC_NONE;
    if (w->codec != SL_CODEC_NONE) {
        char cerr[160];
        rc = sl__codec_compress_dict(w->codec, w->level, w->dict, raw, n,
                                     &w->comp, cerr, sizeof cerr);
        if (rc)
            return sl__fail(err, errlen, rc, "%s: record %s: %s", w->path, name,
                            cerr);
        if (w->comp.n > UINT32_MAX)
            return sl__fail(err, errlen, SL_ERANGE,
                            "%s: record %s: compressed size over 4 GiB",
                            w->path, name);
        /* Incompressible (already compressed JPEG, say): keep the raw
         * bytes, tagged none, rather than pay for a bigger record and a
         * decompression on every read. */
        if (w->comp.n < n) {
            stored = w->comp.p;
            stored_n = w->comp.n;
            codec = w->codec;
        }
    }

    uint8_t e[SL_SHARD_ENTRY_SIZE] = {0};
    sl__put_u64(e + SL_SHARD_E_OFFSET, w->off);
    sl__put_u32(e + SL_SHARD_E_STORED, (uint32_t)stored_n);
    sl__put_u32(e + SL_SHARD_E_RAW, (uint32_t)n);
    sl__put_u64(e + SL_SHARD_E_CHECKSUM, XXH3_64bits(raw, n));
    sl__put_u64(e + SL_SHARD_E_LABEL, (uint64_t)label);
    sl__put_u32(e + SL_SHARD_E_NAME_OFF, (uint32_t)w->names.n);
    sl__put_u16(e + SL_SHARD_E_NAME_LEN, (uint16_t)len);
    e[SL_SHARD_E_CODEC] = (uint8_t)codec;
    size_t index_n = w->index.n, names_n = w->names.n;
    if (bytes_append(&w->index, e, sizeof e) ||
        bytes_append(&w->names, name, len + 1)) {
        w->index.n = index_n;
        w->names.n = names_n;
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", w->path);
    }
    if (stored_n && write_at(w->fd, stored, stored_n, w->off)) {
        int e2 = errno;
        w->failed = 1;
        w->index.n = index_n;
        w->names.n = names_n;
        return sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", w->path,
                        strerror(e2));
    }
    w->off += stored_n;
    w->count++;
    return 0;
}

uint64_t sl__shard_writer_bytes(const sl__shard_writer_t *w)
{
    return w->off + w->index.n + w->names.n;
}

uint64_t sl__shard_writer_count(const sl__shard_writer_t *w)
{
    return w->count;
}

int sl__shard_writer_finish(sl__shard_writer_t *w, char *err, size_t errlen)
{
    if (!w)
        return sl__fail(err, errlen, SL_EINVAL, "shard writer: NULL");
    if (w->failed) {
        int rc = sl__fail(err, errlen, SL_ESTATE, "%s: an earlier write failed",
                          w->path);
        sl__shard_writer_abort(w);
        return rc;
    }
    uint64_t index_size = w->index.n + w->names.n;
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        int rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", w->path);
        sl__shard_writer_abort(w);
        return rc;
    }
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, w->index.p, w->index.n);
    XXH3_64bits_update(st, w->names.p, w->names.n);
    uint64_t index_sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);

    uint8_t h[SL_SHARD_HEADER_SIZE_DICT] = {0};
    uint32_t hs = w->hsize;
    memcpy(h + SL_SHARD_H_MAGIC, SL_SHARD_MAGIC, SL_SHARD_MAGIC_LEN);
    sl__put_u16(h + SL_SHARD_H_MAJOR, SL_SHARD_VERSION_MAJOR);
    sl__put_u16(h + SL_SHARD_H_MINOR, w->dict_n ? SL_SHARD_VERSION_MINOR_DICT
                                                : SL_SHARD_VERSION_MINOR);
    sl__put_u32(h + SL_SHARD_H_HEADER_SIZE, hs);
    sl__put_u64(h + SL_SHARD_H_COUNT, w->count);
    sl__put_u64(h + SL_SHARD_H_INDEX_OFF, w->off);
    sl__put_u64(h + SL_SHARD_H_INDEX_SIZE, index_size);
    sl__put_u32(h + SL_SHARD_H_ENTRY_SIZE, SL_SHARD_ENTRY_SIZE);
    sl__put_u32(h + SL_SHARD_H_FLAGS, 0);
    sl__put_u64(h + SL_SHARD_H_INDEX_SUM, index_sum);
    if (w->dict_n) {
        sl__put_u64(h + SL_SHARD_H_DICT_OFF, w->dict_off);
        sl__put_u32(h + SL_SHARD_H_DICT_SIZE, w->dict_n);
        sl__put_u32(h + SL_SHARD_H_DICT_ID, sl__codec_dict_id(w->dict));
        sl__put_u64(h + SL_SHARD_H_DICT_SUM, w->dict_sum);
    }
    sl__put_u64(h + hs - 8, XXH3_64bits(h, hs - 8));

    const char *what = "write";
    int ok = !write_at(w->fd, w->index.p, w->index.n, w->off) &&
             !write_at(w->fd, w->names.p, w->names.n, w->off + w->index.n) &&
             !write_at(w->fd, h, hs, 0);
    if (ok && !(ok = !fsync(w->fd)))
        what = "fsync";
    if (ok) {
        ok = !close(w->fd);
        w->fd = -1;
        what = "close";
    }
    if (ok && !(ok = !rename(w->tmp, w->path)))
        what = "rename";
    if (!ok) {
        int rc = sl__fail(err, errlen, SL_EIO, "%s: %s failed: %s", w->path,
                          what, strerror(errno));
        sl__shard_writer_abort(w);
        return rc;
    }
    free(w->tmp);
    w->tmp = NULL; /* renamed: nothing left to remove */
    /* The data is safe; a failed folder fsync only weakens durability of the
     * name after a power cut, so it is not an error. */
    (void)sync_parent(w->path);
    sl__shard_writer_abort(w);
    return 0;
}

void sl__shard_writer_abort(sl__shard_writer_t *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    sl__bytes_free(&w->index);
    sl__bytes_free(&w->names);
    sl__bytes_free(&w->comp);
    sl__codec_dict_free(w->dict);
    free(w);
}
