/* text/tok_stream: encoding a file read in blocks, with the ids of the
 * whole (sl__tok_encode_part says why they are the same). What is held is
 * one block and the text whose ids are not yet certain, not the file: a
 * 200 MB line of prose took 640 MB encoded whole (issue: text has no
 * memory bound). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "text/tokenizer.h"

/* Bytes read at a time. A piece (or word) longer than what is held is
 * read in doubling steps, so a giant one costs O(its length) in all, not
 * one rescan per block. */
#define STREAM_BLOCK ((size_t)1 << 20)

/* Reads up to `want` bytes (fewer only at the end). @return the bytes, or
 * -1 with errno. */
static ssize_t read_full(int fd, uint8_t *p, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t k = read(fd, p + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

int sl__tok_encode_fd(const sl__tok_t *t, int fd, const char *name,
                      int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                      sl__tok_emit_fn emit, void *ctx, uint64_t *bytes,
                      char *err, size_t errlen)
{
    sl__bytes_t buf = {0}; /* held: text not yet encoded */
    uint64_t total = 0;
    int rc = 0, more = 1;
    while (!rc && more) {
        size_t want = buf.n > STREAM_BLOCK ? buf.n : STREAM_BLOCK;
        if (sl__bytes_reserve(&buf, buf.n + want)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
            break;
        }
        ssize_t got = read_full(fd, buf.p + buf.n, want);
        if (got < 0) {
            int e = errno;
            rc = sl__fail(err, errlen, sl__errno_code(e, SL_EIO),
                          "%s: read failed: %s", name, strerror(e));
            break;
        }
        more = (size_t)got == want;
        buf.n += (size_t)got;
        total += (uint64_t)got;
        size_t used = 0;
        char why[400];
        ids->n = 0;
        rc = sl__tok_encode_part(t, (const char *)buf.p, buf.n, more,
                                 allow_special, s, ids, &used, why, sizeof why);
        if (rc)
            sl__fail(err, errlen, rc, "%s: %s", name, why);
        else if (ids->n)
            rc = emit(ids->v, ids->n, ctx);
        memmove(buf.p, buf.p + used, buf.n - used);
        buf.n -= used;
    }
    sl__bytes_free(&buf);
    if (bytes)
        *bytes = total;
    return rc;
}
