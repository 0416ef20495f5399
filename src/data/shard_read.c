/* data/shard_read: opens a shard (a file, or bytes in memory) and reads its
 * records. Nothing in the file is trusted before it is checked: the header
 * and index checksums first, then every entry's bounds, so that after open
 * any entry can be used without further range checks. One parser serves
 * both sources; they differ only in how bytes are fetched (read_at). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bytesrc.h"
#include "codec/codec.h"
#include "remote.h"
#include "remote_parse.h"
#include "shard.h"
#include "shard_format.h"

struct sl__shard {
    char *path;         /* as opened, or "<memory>"; starts every message */
    int fd;             /* -1 over memory or a URL */
    const uint8_t *mem; /* over memory: the caller's bytes */
    sl__bytesrc_t *src; /* a URL (data/remote through data/bytesrc) */
    uint64_t size;      /* bytes of the file or memory */
    int major, minor;
    uint64_t digest; /* the header checksum */
    uint64_t count;
    uint64_t data_start;    /* = header size */
    uint64_t data_end;      /* = index offset */
    uint8_t *index;         /* the index bytes; entry names point into it */
    sl__codec_dict_t *dict; /* zstd-dict records' dictionary, or NULL */
    size_t dict_n;
    sl__shard_entry_t *entries;
};

#define SL_SHARD_MEM_NAME "<memory>"

/* Reads n bytes at off. 0, or -1 with errno set (0 for a short read: the
 * file is shorter than when it was opened). Callers keep off + n <= size. */
static int read_at(const sl__shard_t *s, void *buf, size_t n, uint64_t off)
{
    if (s->fd < 0) {
        if (n)
            memcpy(buf, s->mem + off, n);
        return 0;
    }
    uint8_t *b = buf;
    while (n) {
        ssize_t r = pread(s->fd, b, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        b += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int read_fail(const sl__shard_t *s, const char *what, char *err,
                     size_t errlen)
{
    if (errno == 0)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: %s: file ended early (changed while open?)",
                        s->path, what);
    return sl__fail(err, errlen, sl__errno_code(errno, SL_EIO),
                    "%s: %s: read failed: %s", s->path, what, strerror(errno));
}

/* n bytes at off for the open (what: "header", "index"), from any of the
 * three sources. 0, or the error with the message. */
static int fetch(const sl__shard_t *s, void *buf, size_t n, uint64_t off,
                 const char *what, char *err, size_t errlen)
{
    if (s->src) {
        char why[1024];
        int rc = sl__bytesrc_read(s->src, off, buf, n, why, sizeof why);
        return rc ? sl__fail(err, errlen, rc, "%s (%s)", why, what) : 0;
    }
    return read_at(s, buf, n, off) ? read_fail(s, what, err, errlen) : 0;
}

int sl__shard_fetch(const sl__shard_t *s, void *buf, size_t n, uint64_t off,
                    const char *what, char *err, size_t errlen)
{
    return fetch(s, buf, n, off, what, err, errlen);
}

const sl__codec_dict_t *sl__shard_dict(const sl__shard_t *s)
{
    return s->dict;
}

/* Loads the zstd dictionary a 1.1 header h points to (none when its size
 * is 0): its bounds inside the data region, its checksum, its ID, then
 * zstd's own parse, each failure an error naming the shard. */
static int load_dict(sl__shard_t *s, const uint8_t *h, char *err, size_t errlen)
{
    uint64_t off = sl__get_u64(h + SL_SHARD_H_DICT_OFF);
    uint32_t n = sl__get_u32(h + SL_SHARD_H_DICT_SIZE);
    uint32_t id = sl__get_u32(h + SL_SHARD_H_DICT_ID);
    uint64_t sum = sl__get_u64(h + SL_SHARD_H_DICT_SUM);
    if (n == 0)
        return 0;
    if (n > SL__CODEC_DICT_MAX || off < s->data_start || off > s->data_end ||
        n > s->data_end - off)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt dictionary: %" PRIu32 " bytes at %" PRIu64
                        " outside the data region",
                        s->path, n, off);
    uint8_t *p = malloc(n);
    if (!p)
        return sl__fail(err, errlen, SL_ENOMEM,
                        "%s: out of memory for its dictionary", s->path);
    int rc = fetch(s, p, n, off, "dictionary", err, errlen);
    if (!rc && XXH3_64bits(p, n) != sum)
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: corrupt dictionary: checksum mismatch", s->path);
    char why[160];
    if (!rc && (rc = sl__codec_dict_load(p, n, 0, &s->dict, why, sizeof why)))
        rc = sl__fail(err, errlen, rc, "%s: corrupt dictionary: %s", s->path,
                      why);
    if (!rc && sl__codec_dict_id(s->dict) != id)
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: corrupt dictionary: ID %u, the header says %" PRIu32,
                      s->path, sl__codec_dict_id(s->dict), id);
    free(p);
    s->dict_n = rc ? 0 : n;
    return rc;
}

/* Checks and decodes the header; sets count, data_end, version. On return
 * 0, [data_end, size) is the index of *index_size bytes and *entry_size is
 * the stride of its entries. */
static int parse_header(sl__shard_t *s, uint64_t *index_size,
                        uint32_t *entry_size, uint64_t *index_sum, char *err,
                        size_t errlen)
{
    uint8_t h[SL_SHARD_HEADER_MAX];
    if (s->size < SL_SHARD_HEADER_SIZE)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: %" PRIu64
                        " bytes, less than a shard header (%d)",
                        s->path, s->size, SL_SHARD_HEADER_SIZE);
    int rc = fetch(s, h, SL_SHARD_HEADER_SIZE, 0, "header", err, errlen);
    if (rc)
        return rc;
    if (memcmp(h, SL_SHARD_MAGIC, SL_SHARD_MAGIC_LEN))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: not a sluice shard (bad magic)", s->path);
    s->major = sl__get_u16(h + SL_SHARD_H_MAJOR);
    s->minor = sl__get_u16(h + SL_SHARD_H_MINOR);
    if (s->major != SL_SHARD_VERSION_MAJOR)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: shard format version %d.%d (this reader reads "
                        "%d.x)",
                        s->path, s->major, s->minor, SL_SHARD_VERSION_MAJOR);
    uint32_t hsize = sl__get_u32(h + SL_SHARD_H_HEADER_SIZE);
    if (hsize < SL_SHARD_HEADER_SIZE || hsize > SL_SHARD_HEADER_MAX ||
        hsize % 8)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt header: header size %" PRIu32, s->path,
                        hsize);
    if (s->size < hsize)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: %" PRIu64
                        " bytes, less than its header (%" PRIu32 ")",
                        s->path, s->size, hsize);
    if (hsize > SL_SHARD_HEADER_SIZE &&
        (rc = fetch(s, h + SL_SHARD_HEADER_SIZE, hsize - SL_SHARD_HEADER_SIZE,
                    SL_SHARD_HEADER_SIZE, "header", err, errlen)))
        return rc;
    s->digest = sl__get_u64(h + hsize - 8);
    if (XXH3_64bits(h, hsize - 8) != s->digest)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt header: checksum mismatch", s->path);

    s->data_start = hsize;
    s->count = sl__get_u64(h + SL_SHARD_H_COUNT);
    s->data_end = sl__get_u64(h + SL_SHARD_H_INDEX_OFF);
    *index_size = sl__get_u64(h + SL_SHARD_H_INDEX_SIZE);
    *entry_size = sl__get_u32(h + SL_SHARD_H_ENTRY_SIZE);
    *index_sum = sl__get_u64(h + SL_SHARD_H_INDEX_SUM);
    if (s->data_end < hsize)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt header: index offset %" PRIu64
                        " inside the header",
                        s->path, s->data_end);
    if (s->data_end > s->size)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: index offset %" PRIu64
                        " beyond the end of the file (%" PRIu64 " bytes)",
                        s->path, s->data_end, s->size);
    /* The index runs to the end of the file: anything else is a truncated
     * file or bytes appended after it. */
    if (*index_size > s->size - s->data_end)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: the index ends at byte %" PRIu64
                        " but the file has %" PRIu64 " bytes",
                        s->path,
                        *index_size > UINT64_MAX - s->data_end
                            ? UINT64_MAX
                            : s->data_end + *index_size,
                        s->size);
    if (*index_size < s->size - s->data_end)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: %" PRIu64 " trailing bytes after the index",
                        s->path, s->size - s->data_end - *index_size);
    if (*entry_size < SL_SHARD_ENTRY_SIZE || *entry_size > SL_SHARD_ENTRY_MAX)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt header: index entry size %" PRIu32,
                        s->path, *entry_size);
    if (s->count > *index_size / *entry_size)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt header: %" PRIu64
                        " records do not fit an index of %" PRIu64 " bytes",
                        s->path, s->count, *index_size);
    return hsize >= SL_SHARD_HEADER_SIZE_DICT ? load_dict(s, h, err, errlen)
                                              : 0;
}

/* Decodes and checks every entry of s->index. */
static int parse_index(sl__shard_t *s, uint64_t index_size, uint32_t entry_size,
                       char *err, size_t errlen)
{
    /* count <= index_size / entry_size <= size / 40, so neither product
     * overflows once index_size fits a size_t (checked by the caller). */
    uint64_t names_at = s->count * entry_size;
    uint64_t names_n = index_size - names_at;
    const char *names = (const char *)s->index + names_at;
    s->entries = calloc(s->count ? (size_t)s->count : 1, sizeof *s->entries);
    if (!s->entries)
        return sl__fail(err, errlen, SL_ENOMEM,
                        "%s: out of memory for %" PRIu64 " index entries",
                        s->path, s->count);
    for (uint64_t i = 0; i < s->count; i++) {
        const uint8_t *p = s->index + i * entry_size;
        sl__shard_entry_t *e = &s->entries[i];
        e->offset = sl__get_u64(p + SL_SHARD_E_OFFSET);
        e->stored_size = sl__get_u32(p + SL_SHARD_E_STORED);
        e->raw_size = sl__get_u32(p + SL_SHARD_E_RAW);
        e->checksum = sl__get_u64(p + SL_SHARD_E_CHECKSUM);
        e->label = (int64_t)sl__get_u64(p + SL_SHARD_E_LABEL);
        e->codec = p[SL_SHARD_E_CODEC];
        uint32_t name_off = sl__get_u32(p + SL_SHARD_E_NAME_OFF);
        uint32_t name_len = sl__get_u16(p + SL_SHARD_E_NAME_LEN);
        if (e->offset < s->data_start || e->offset > s->data_end ||
            e->stored_size > s->data_end - e->offset)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: corrupt index: record %" PRIu64
                            ": bytes [%" PRIu64 ", +%" PRIu32
                            ") outside the data region",
                            s->path, i, e->offset, e->stored_size);
        if (e->codec == SL_CODEC_NONE && e->stored_size != e->raw_size)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: corrupt index: record %" PRIu64
                            ": uncompressed but stored size %" PRIu32
                            " != raw size %" PRIu32,
                            s->path, i, e->stored_size, e->raw_size);
        if (e->codec == SL_CODEC_ZSTD_DICT && !s->dict)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: corrupt index: record %" PRIu64
                            ": codec zstd-dict but the shard holds no "
                            "dictionary",
                            s->path, i);
        /* The name and the NUL after it lie inside the name table. */
        if (name_off >= names_n || name_len >= names_n - name_off ||
            names[name_off + name_len] != '\0')
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: corrupt index: record %" PRIu64
                            ": name outside the name table",
                            s->path, i);
        for (uint32_t k = 0; k < name_len; k++)
            if (!sl__shard_name_byte_ok((unsigned char)names[name_off + k]))
                return sl__fail(err, errlen, SL_ECORRUPT,
                                "%s: corrupt index: record %" PRIu64
                                ": control byte in its name",
                                s->path, i);
        e->name = names + name_off;
    }
    return 0;
}

/* The whole open, once s->path, fd/mem and size are set. */
static int parse(sl__shard_t *s, char *err, size_t errlen)
{
    uint64_t index_size, index_sum;
    uint32_t entry_size;
    int rc = parse_header(s, &index_size, &entry_size, &index_sum, err, errlen);
    if (rc)
        return rc;
    if (index_size > SIZE_MAX - 1)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: index too large", s->path);
    s->index = malloc((size_t)index_size + 1);
    if (!s->index)
        return sl__fail(err, errlen, SL_ENOMEM,
                        "%s: out of memory for an index of %" PRIu64 " bytes",
                        s->path, index_size);
    if ((rc = fetch(s, s->index, (size_t)index_size, s->data_end, "index", err,
                    errlen)))
        return rc;
    if (XXH3_64bits(s->index, (size_t)index_size) != index_sum)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: corrupt index: checksum mismatch", s->path);
    return parse_index(s, index_size, entry_size, err, errlen);
}

static int open_common(sl__shard_t *s, sl__shard_t **out, char *err,
                       size_t errlen)
{
    int rc = parse(s, err, errlen);
    if (rc) {
        sl__shard_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int sl__shard_open(const char *path, sl__shard_t **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    sl__shard_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    }
    if (sl__remote_is_url(path)) { /* the index, then record ranges */
        s->fd = -1;
        int rc = sl__bytesrc_open_file(path, &s->src, err, errlen);
        if (rc) {
            sl__shard_close(s);
            return rc;
        }
        s->size = sl__bytesrc_size(s->src);
        return open_common(s, out, err, errlen);
    }
    int64_t size = 0;
    s->fd = sl__open_regular(path, &size, err, errlen); /* no FIFO wait */
    if (s->fd < 0) {
        int rc = s->fd;
        sl__shard_close(s);
        return rc;
    }
    s->size = (uint64_t)size;
    return open_common(s, out, err, errlen);
}

int sl__shard_open_mem(const void *p, size_t n, sl__shard_t **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    sl__shard_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(SL_SHARD_MEM_NAME))) {
        free(s);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    s->fd = -1;
    s->mem = p ? p : (const uint8_t *)"";
    s->size = p ? n : 0;
    return open_common(s, out, err, errlen);
}

void sl__shard_close(sl__shard_t *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    sl__bytesrc_close(s->src);
    sl__codec_dict_free(s->dict);
    free(s->entries);
    free(s->index);
    free(s->path);
    free(s);
}

uint64_t sl__shard_count(const sl__shard_t *s)
{
    return s->count;
}

const char *sl__shard_path(const sl__shard_t *s)
{
    return s->path;
}

uint64_t sl__shard_size(const sl__shard_t *s)
{
    return s->size;
}

uint64_t sl__shard_digest(const sl__shard_t *s)
{
    return s->digest;
}

int sl__shard_is_remote(const sl__shard_t *s)
{
    return s->src != NULL;
}

struct sl__remote *sl__shard_remote(const sl__shard_t *s)
{
    return s->src ? sl__bytesrc_remote(s->src) : NULL;
}

int sl__shard_label_check(const sl__shard_t *s, uint64_t i, int64_t classes,
                          char *err, size_t errlen)
{
    const sl__shard_entry_t *e = &s->entries[i];
    if (classes >= 0 && (e->label < 0 || e->label >= classes))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: record %" PRIu64 " (%s): label %" PRId64
                        " outside classes.txt (%" PRId64 " classes)",
                        s->path, i, e->name, e->label, classes);
    if (classes < 0 && (e->label < 0 || e->label >= SL__SHARD_CLASSES_MAX))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: record %" PRIu64 " (%s): label %" PRId64
                        " is not a class index (no classes.txt: labels "
                        "0..%d)",
                        s->path, i, e->name, e->label,
                        SL__SHARD_CLASSES_MAX - 1);
    return 0;
}

size_t sl__shard_dict_size(const sl__shard_t *s)
{
    return s->dict_n;
}

unsigned sl__shard_dict_id(const sl__shard_t *s)
{
    return s->dict ? sl__codec_dict_id(s->dict) : 0;
}

void sl__shard_version(const sl__shard_t *s, int *major, int *minor)
{
    *major = s->major;
    *minor = s->minor;
}

const sl__shard_entry_t *sl__shard_entry(const sl__shard_t *s, uint64_t i)
{
    return i < s->count ? &s->entries[i] : NULL;
}

int sl__shard_read(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                   sl__bytes_t *scratch, uint64_t *stored_bytes, char *err,
                   size_t errlen)
{
    return sl__shard_read_admit(s, i, out, scratch, NULL, stored_bytes, err,
                                errlen);
}

int sl__shard_read_admit(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                         sl__bytes_t *scratch, const sl__admit_t *admit,
                         uint64_t *stored_bytes, char *err, size_t errlen)
{
    sl__shard_io_t io;
    int rc = sl__shard_read_begin(s, i, out, scratch, admit, &io, err, errlen);
    if (rc) {
        if (stored_bytes)
            *stored_bytes = 0;
        return rc;
    }
    /* The whole read here; _end reads nothing more unless it failed. */
    int64_t res = 0;
    char why[1024] = "";
    if (io.len && io.remote) {
        int rc =
            sl__remote_read(io.remote, io.off, io.dst, io.len, why, sizeof why);
        res = rc ? rc : (int64_t)io.len;
    } else if (io.len) {
        errno = 0;
        res = read_at(s, io.dst, io.len, io.off) ? (errno ? -errno : 0)
                                                 : (int64_t)io.len;
    }
    return sl__shard_read_end(s, i, out, scratch, res, why, stored_bytes, err,
                              errlen);
}

static int no_memory(const sl__shard_t *s, uint64_t i, uint64_t bytes,
                     char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_ENOMEM,
                    "%s: record %" PRIu64 " (%s): out of memory for %" PRIu64
                    " bytes",
                    s->path, i, s->entries[i].name, bytes);
}

int sl__shard_read_begin(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                         sl__bytes_t *scratch, const sl__admit_t *admit,
                         sl__shard_io_t *io, char *err, size_t errlen)
{
    memset(io, 0, sizeof *io);
    io->fd = -1;
    if (i >= s->count)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s: record %" PRIu64 " out of range (%" PRIu64
                        " records)",
                        s->path, i, s->count);
    const sl__shard_entry_t *e = &s->entries[i];
    if (e->codec < SL_CODEC_NONE || e->codec > SL__CODEC_LAST)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: record %" PRIu64 " (%s): unknown codec tag %d",
                        s->path, i, e->name, e->codec);
    char why[256];
    int64_t need =
        (int64_t)e->raw_size + 1 +
        (e->codec != SL_CODEC_NONE ? (int64_t)e->stored_size + 1 : 0);
    int arc = sl__admit(admit, need, why, sizeof why);
    if (arc)
        return sl__fail(err, errlen, arc, "%s: record %" PRIu64 " (%s): %s",
                        s->path, i, e->name, why);
    /* +1: a buffer exists even for an empty record. A compressed one's
     * raw buffer waits until its stored bytes say they can give raw_size
     * (sl__shard_read_end): the index alone could ask for 4 GiB. */
    if (e->codec == SL_CODEC_NONE
            ? sl__bytes_reserve(out, (size_t)e->raw_size + 1)
            : sl__bytes_reserve(scratch, (size_t)e->stored_size + 1))
        return no_memory(
            s, i, e->codec == SL_CODEC_NONE ? e->raw_size : e->stored_size, err,
            errlen);
    /* Uncompressed records go straight to out: no copy. */
    uint8_t *dst = e->codec == SL_CODEC_NONE ? out->p : scratch->p;
    if (s->src) { /* a URL: one ranged request, the caller's */
        io->remote = sl__bytesrc_remote(s->src);
        io->dst = dst;
        io->len = e->stored_size;
        io->off = e->offset;
        io->done = !io->len;
        return 0;
    }
    if (s->fd < 0) { /* in memory: nothing to wait for */
        if (e->stored_size)
            memcpy(dst, s->mem + e->offset, e->stored_size);
        io->done = 1;
        return 0;
    }
    io->fd = s->fd;
    io->dst = dst;
    io->len = e->stored_size;
    io->off = e->offset;
    return 0;
}

int sl__shard_read_end(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                       sl__bytes_t *scratch, int64_t res, const char *why,
                       uint64_t *stored_bytes, char *err, size_t errlen)
{
    const sl__shard_entry_t *e = &s->entries[i];
    uint8_t *dst = e->codec == SL_CODEC_NONE ? out->p : scratch->p;
    if (stored_bytes)
        *stored_bytes = 0;
    if (s->src && res < 0) /* a ranged request, failed after its retries */
        return sl__fail(err, errlen, (int)res,
                        "%s: record %" PRIu64 " (%s): read failed: %s", s->path,
                        i, e->name, why ? why : "");
    int failed = 0;
    errno = 0;
    if (s->fd >= 0 && res < 0) {
        errno = (int)-res;
        failed = 1;
    } else if (s->fd >= 0 && (uint64_t)res < e->stored_size) {
        /* A short read: the rest here (0 bytes more: the file shrank). */
        failed = res == 0 && e->stored_size
                     ? 1
                     : read_at(s, dst + res, e->stored_size - (uint64_t)res,
                               e->offset + (uint64_t)res);
    }
    if (failed) {
        int code = errno ? sl__errno_code(errno, SL_EIO) : SL_ECORRUPT;
        const char *why = errno ? strerror(errno) : "file ended early";
        return sl__fail(err, errlen, code,
                        "%s: record %" PRIu64 " (%s): read failed: %s", s->path,
                        i, e->name, why);
    }
    if (stored_bytes)
        *stored_bytes = e->stored_size;
    if (e->codec != SL_CODEC_NONE) {
        char cerr[160];
        int rc = sl__codec_check_raw(e->codec, scratch->p, e->stored_size,
                                     e->raw_size, cerr, sizeof cerr);
        if (!rc && sl__bytes_reserve(out, (size_t)e->raw_size + 1))
            return no_memory(s, i, e->raw_size, err, errlen);
        if (!rc)
            rc = sl__codec_decompress_dict(e->codec, s->dict, scratch->p,
                                           e->stored_size, out->p, e->raw_size,
                                           cerr, sizeof cerr);
        if (rc)
            return sl__fail(err, errlen, rc, "%s: record %" PRIu64 " (%s): %s",
                            s->path, i, e->name, cerr);
    }
    uint64_t sum = XXH3_64bits(out->p, e->raw_size);
    if (sum != e->checksum)
        return sl__fail(err, errlen, SL_ECHECKSUM,
                        "%s: record %" PRIu64
                        " (%s): checksum mismatch (index %016" PRIx64
                        ", data %016" PRIx64 ")",
                        s->path, i, e->name, e->checksum, sum);
    out->n = e->raw_size;
    return 0;
}
