#include "core/statefile.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static int in_range(const sl__state_t *s)
{
    return s->pos.epoch >= 0 && s->pos.epoch <= SL__STATE_MAX_NUM &&
           s->pos.batch >= 0 && s->pos.batch <= SL__STATE_MAX_NUM &&
           s->samples >= 0 && s->samples <= SL__STATE_MAX_NUM;
}

int sl__state_format(const char *magic, const sl__state_t *s, char *buf,
                     size_t len)
{
    if (!in_range(s))
        return -1;
    int n = snprintf(buf, len,
                     "%s\nepoch %" PRId64 "\nbatch %" PRId64
                     "\ndigest %016" PRIx64 "\nconfig %016" PRIx64
                     "\nsamples %" PRId64 "\ndataset %016" PRIx64 "\n",
                     magic, s->pos.epoch, s->pos.batch, s->digest, s->config,
                     s->samples, s->dataset);
    return n < 0 || (size_t)n >= len || n > SL__STATE_MAX_BYTES ? -1 : n;
}

/* The parse: a cursor over the text and the line it is on. */
typedef struct cur {
    const char *p, *end;
    int line;
} cur_t;

/* The line's text "<key> " and nothing before; then its value's bytes up to
 * the newline (which must be there). The cursor stays on the line until
 * the value is taken (next_line), so an error names this line. */
static int field(const cur_t *c, const char *key, const char **v, size_t *vn)
{
    size_t k = strlen(key);
    if ((size_t)(c->end - c->p) <= k || memcmp(c->p, key, k) || c->p[k] != ' ')
        return -1;
    const char *b = c->p + k + 1;
    const char *nl = memchr(b, '\n', (size_t)(c->end - b));
    if (!nl)
        return -1;
    *v = b;
    *vn = (size_t)(nl - b);
    return 0;
}

/* Past a value that field() gave and the caller accepted. */
static void next_line(cur_t *c, const char *v, size_t vn)
{
    c->p = v + vn + 1;
    c->line++;
}

static int dec(cur_t *c, const char *key, int64_t *out)
{
    const char *v;
    size_t n;
    if (field(c, key, &v, &n) || n < 1 || n > 18 || (n > 1 && v[0] == '0'))
        return -1; /* one spelling per number: no leading zeros */
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    next_line(c, v, n);
    return 0;
}

static int hex(cur_t *c, const char *key, uint64_t *out)
{
    const char *v;
    size_t n;
    if (field(c, key, &v, &n) || n != 16)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        int d = v[i] >= '0' && v[i] <= '9'   ? v[i] - '0'
                : v[i] >= 'a' && v[i] <= 'f' ? v[i] - 'a' + 10
                                             : -1;
        if (d < 0)
            return -1;
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    next_line(c, v, n);
    return 0;
}

int sl__state_parse(const char *text, size_t n, const char *magic,
                    sl__state_t *s, char *err, size_t errlen)
{
    if (n > SL__STATE_MAX_BYTES)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%zu bytes: a state file has at most %d", n,
                        SL__STATE_MAX_BYTES);
    size_t m = strlen(magic);
    if (n <= m || memcmp(text, magic, m) || text[m] != '\n')
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "line 1 is not \"%s\" (not a state file, or one of "
                        "another version)",
                        magic);
    cur_t c = {text + m + 1, text + n, 2};
    sl__state_t t;
    static const char *const keys[] = {"epoch",  "batch",   "digest",
                                       "config", "samples", "dataset"};
    int bad = dec(&c, keys[0], &t.pos.epoch)   ? 0
              : dec(&c, keys[1], &t.pos.batch) ? 1
              : hex(&c, keys[2], &t.digest)    ? 2
              : hex(&c, keys[3], &t.config)    ? 3
              : dec(&c, keys[4], &t.samples)   ? 4
              : hex(&c, keys[5], &t.dataset)   ? 5
                                               : -1;
    if (bad >= 0)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "line %d: expected \"%s\" and a %s", c.line, keys[bad],
                        bad == 2 || bad == 3 || bad == 5
                            ? "16-digit lowercase hex number"
                            : "decimal number of at most 18 digits");
    if (c.p != c.end)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "line %d: unexpected text after the last field",
                        c.line);
    *s = t;
    return 0;
}
