/* cli/opts: one parser and one usage printer for the option tables of
 * every command (see opts.h). */
#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define OPTS_MAX 64      /* rows of a command line, both tables */
#define OPTS_CODE 0x1000 /* getopt_long code of row i: OPTS_CODE + i */
#define OPTS_COL 22      /* the help column of the usage */
#define OPTS_WIDTH 79    /* and its last */

long long sl__parse_size(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    long long v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        int d = *s - '0';
        if (v > (LLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    const char *units = "KMGT",
               *u = *s ? strchr(units, toupper((unsigned char)*s)) : NULL;
    int shift = u ? 10 * (int)(u - units + 1) : 0;
    if (shift) {
        s++;
        s += *s == 'i';
    }
    s += toupper((unsigned char)*s) == 'B';
    if (*s || v > (LLONG_MAX >> shift))
        return -1;
    return v << shift;
}

int sl__parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int sl__opts_distance(const char *a, const char *b)
{
    enum { N = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= N || m >= N)
        return INT_MAX;
    int d[N][N]; /* d[i][j]: between a's first i bytes and b's first j */
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

/* The rows of both tables, in order, and the struct each one fills. */
typedef struct rows {
    const sl__opt_t *r[OPTS_MAX];
    void *dst[OPTS_MAX];
    int n;
} rows_t;

static void rows_of(const sl__opts_t *d, void *own, void *shared, rows_t *rs)
{
    rs->n = 0;
    for (int t = 0; t < 2; t++)
        for (const sl__opt_t *o = d->table[t]; o && o->name; o++) {
            if (rs->n == OPTS_MAX)
                abort(); /* a table too long: a bug, caught by any test */
            rs->dst[rs->n] = t ? shared : own;
            rs->r[rs->n++] = o;
        }
}

static int takes_value(const sl__opt_t *o)
{
    return o->kind != SL__OPT_FLAG && o->kind != SL__OPT_UNSET;
}

/* The value's name in the usage: the row's, or a CHOICE's names. */
static const char *arg_name(const sl__opt_t *o, char *buf, size_t len)
{
    if (o->arg || o->kind != SL__OPT_CHOICE)
        return o->arg ? o->arg : "V";
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; o->choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "",
                              o->choices[i]);
    return buf;
}

/* Stores value s into the field of row o. @return 0, or -1 (bad). */
static int store(const sl__opt_t *o, const char *s, void *field)
{
    long long v;
    char *end;
    double x;
    switch (o->kind) {
    case SL__OPT_FLAG:
    case SL__OPT_UNSET:
        *(int *)field = o->kind == SL__OPT_FLAG;
        return 0;
    case SL__OPT_INT:
    case SL__OPT_I64:
        if (sl__parse_ll(
                s, o->lo <= (double)LLONG_MIN ? LLONG_MIN : (long long)o->lo,
                o->hi >= (double)LLONG_MAX ? LLONG_MAX : (long long)o->hi, &v))
            return -1;
        if (o->kind == SL__OPT_INT)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        return 0;
    case SL__OPT_U64:
        errno = 0;
        uint64_t u = strtoull(s, &end, 10);
        if (!isdigit((unsigned char)*s) || *end || errno)
            return -1;
        *(uint64_t *)field = u;
        return 0;
    case SL__OPT_DOUBLE:
        x = strtod(s, &end);
        if (!*s || *end || !(x >= o->lo && x <= o->hi))
            return -1;
        *(double *)field = x;
        return 0;
    case SL__OPT_SIZE:
        v = sl__parse_size(s);
        if (v < 0 || (double)v < o->lo || (double)v > o->hi)
            return -1;
        *(int64_t *)field = v;
        return 0;
    case SL__OPT_STR:
        *(const char **)field = s;
        return 0;
    case SL__OPT_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(s, o->choices[i])) {
                *(int *)field = o->values ? o->values[i] : i;
                return 0;
            }
        return -1;
    case SL__OPT_CALL:
        return o->parse(s, field) ? -1 : 0;
    }
    return -1;
}

/* "sluice CMD: bad value 'V' for --X (what it takes)". */
static void bad_value(const char *cmd, const sl__opt_t *o, const char *s)
{
    char what[160], names[128];
    sl__opt_kind_t k = o->kind;
    const char *noun = k == SL__OPT_SIZE     ? "a size like 512M"
                       : k == SL__OPT_DOUBLE ? "a number"
                       : k == SL__OPT_U64    ? "an unsigned integer"
                                             : "an integer";
    const char *range = k == SL__OPT_U64       ? "%s"
                        : o->lo == SL__OPT_POS ? "%s > 0"
                        : o->hi >= 9e18        ? "%s >= %.15g"
                                               : "%s in [%.15g, %.15g]";
    if (k == SL__OPT_CHOICE || k == SL__OPT_CALL)
        snprintf(what, sizeof what, "%s", arg_name(o, names, sizeof names));
    else if (k != SL__OPT_U64 && o->lo == SL__OPT_POS && o->hi < 9e18)
        snprintf(what, sizeof what, "%s in (0, %.15g]", noun, o->hi);
    else /* the format is one of the four above */
        snprintf(what, sizeof what, range, noun, o->lo, o->hi);
    char *shown = sl__msg_escape_dup(s);
    fprintf(stderr, "sluice %s: bad value '%s' for --%s (%s)\n", cmd,
            shown ? shown : "?", o->name, what);
    free(shown);
}

/* "unknown option 'A'" (A as given, argv's), with what was likely meant:
 * the options an ambiguous prefix names ("--ca": --cache, --cache-policy,
 * ...), or the closest name when one is close (a typo: "--siez"). */
static int unknown(const sl__opts_t *d, const rows_t *rs, const char *cmd,
                   const char *arg)
{
    char *shown = sl__msg_escape_dup(arg), hint[512] = "";
    if (!strncmp(arg, "--", 2) && arg[2] && arg[2] != '=') {
        const char *name = arg + 2;
        size_t len = strcspn(name, "="), k = 0;
        if (shown) /* the name, without its value */
            shown[strcspn(shown + 2, "=") + 2] = 0;
        int prefixed = 0, best = INT_MAX;
        const char *closest = NULL;
        char typed[64];
        snprintf(typed, sizeof typed, "%.*s", (int)len, name);
        for (int i = 0; i <= rs->n; i++) {
            const char *o = i < rs->n ? rs->r[i]->name : "help";
            if (!strncmp(o, name, len) && k < sizeof hint) {
                k += (size_t)snprintf(hint + k, sizeof hint - k, "%s--%s",
                                      prefixed++ ? ", " : "", o);
            }
            int dist =
                len < sizeof typed ? sl__opts_distance(typed, o) : INT_MAX;
            if (dist < best) {
                best = dist;
                closest = o;
            }
        }
        /* Close: at most 2 edits, and fewer than a third of the name (a
         * short name is near too many others to guess). */
        if (prefixed < 2 && closest && best <= 2 && 3 * best <= (int)len)
            snprintf(hint, sizeof hint, "; did you mean --%s?", closest);
        else if (prefixed < 2)
            hint[0] = 0;
        int rc =
            sl__opts_bad(d, cmd, "%s option '%s'%s%s",
                         prefixed > 1 ? "ambiguous" : "unknown",
                         shown ? shown : "?", prefixed > 1 ? ": " : "", hint);
        free(shown);
        return rc;
    }
    int rc = sl__opts_bad(d, cmd, "unknown option '%s'", shown ? shown : "?");
    free(shown);
    return rc;
}

int sl__opts_parse(const sl__opts_t *d, void *own, void *shared, int argc,
                   char **argv)
{
    rows_t rs;
    rows_of(d, own, shared, &rs);
    struct option lo[OPTS_MAX + 2];
    char shorts[2 * OPTS_MAX + 4] = ":h", *sp = shorts + 2;
    for (int i = 0; i < rs.n; i++) {
        const sl__opt_t *o = rs.r[i];
        lo[i] = (struct option){o->name, takes_value(o), NULL, OPTS_CODE + i};
        if (o->letter) {
            *sp++ = (char)o->letter;
            if (takes_value(o))
                *sp++ = ':';
        }
    }
    *sp = 0;
    lo[rs.n] = (struct option){"help", 0, NULL, 'h'};
    lo[rs.n + 1] = (struct option){NULL, 0, NULL, 0};
    const char *cmd = argv[0];
    char given[OPTS_MAX] = {0};
    int c;
    optind = 0; /* GNU: a full re-initialisation */
    opterr = 0; /* the messages are ours */
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        int i = c - OPTS_CODE;
        for (int k = 0; i < 0 && c > 0 && c < 128 && k < rs.n; k++)
            if (rs.r[k]->letter == c)
                i = k;
        if (c == 'h') {
            sl__opts_usage(d, stdout, cmd);
            return 0;
        }
        if (c == ':')
            return sl__opts_bad(d, cmd,
                                "a value is missing after the option '%s'",
                                argv[optind - 1]);
        if (c == '?' && optopt > 0 && optopt < 128) { /* -x */
            char arg[3] = {'-', (char)optopt, 0};
            return unknown(d, &rs, cmd, arg);
        }
        if (c == '?' || i < 0 || i >= rs.n)
            return unknown(d, &rs, cmd, argv[optind - 1]);
        const sl__opt_t *o = rs.r[i];
        if (store(o, optarg, (char *)rs.dst[i] + o->off)) {
            bad_value(cmd, o, optarg);
            return 2;
        }
        given[i] = 1;
    }
    for (int i = 0; i < rs.n; i++)
        if (rs.r[i]->need && !given[i])
            return sl__opts_bad(d, cmd, "--%s is required", rs.r[i]->name);
    int n = argc - optind;
    if (argc == 1 && n < d->min) { /* nothing given: show what to give */
        sl__opts_usage(d, stderr, cmd);
        return 2;
    }
    if (n < d->min || (d->max >= 0 && n > d->max))
        return sl__opts_bad(d, cmd, "expected %s",
                            d->operands ? d->operands : "no operands");
    return -1;
}

/* Prints text from column `col` on, broken at spaces before OPTS_WIDTH;
 * the lines after the first start at OPTS_COL. */
static void print_wrapped(FILE *f, const char *text, int col)
{
    while ((int)strlen(text) > OPTS_WIDTH - col) {
        const char *cut = text + OPTS_WIDTH - col;
        while (cut > text && *cut != ' ')
            cut--;
        if (cut == text)
            break;
        fprintf(f, "%.*s\n%*s", (int)(cut - text), text, OPTS_COL, "");
        text = cut + 1;
        col = OPTS_COL;
    }
    fprintf(f, "%s\n", text);
}

void sl__opts_usage(const sl__opts_t *d, FILE *f, const char *cmd)
{
    rows_t rs;
    rows_of(d, NULL, NULL, &rs);
    fprintf(f, "usage: sluice %s %s\n%s", cmd, d->synopsis,
            d->about ? d->about : "");
    for (int i = 0; i < rs.n; i++) {
        const sl__opt_t *o = rs.r[i];
        char left[160], names[128], letter[8] = "";
        if (o->letter)
            snprintf(letter, sizeof letter, "-%c, ", o->letter);
        int v = takes_value(o);
        int n =
            snprintf(left, sizeof left, "  %s--%s%s%s", letter, o->name,
                     v ? " " : "", v ? arg_name(o, names, sizeof names) : "");
        char help[512];
        snprintf(help, sizeof help, o->dflt ? "%s (%s)" : "%s", o->help,
                 o->dflt);
        fprintf(f, "%s%*s", left, n < OPTS_COL ? OPTS_COL - n : 2, "");
        print_wrapped(f, help, n < OPTS_COL ? OPTS_COL : n + 2);
    }
    fprintf(f, "  -h, --help%*sthis text\n%s", OPTS_COL - 12, "",
            d->footer ? d->footer : "");
}

static void verror(const char *who, const char *fmt, va_list ap)
{
    char *m = NULL, *e = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        m = NULL;
    else
        e = sl__msg_escape_dup(m);
    fprintf(stderr, "%s: %s\n", who, e ? e : "(a message lost: out of memory)");
    free(e);
    free(m);
}

void sl__cli_error(const char *cmd, const char *fmt, ...)
{
    char who[64];
    snprintf(who, sizeof who, "sluice %s", cmd);
    va_list ap;
    va_start(ap, fmt);
    verror(who, fmt, ap);
    va_end(ap);
}

int sl__opts_bad(const sl__opts_t *d, const char *cmd, const char *fmt, ...)
{
    char who[64];
    snprintf(who, sizeof who, "sluice %s", cmd);
    va_list ap;
    va_start(ap, fmt);
    verror(who, fmt, ap);
    va_end(ap);
    (void)d; /* the usage is long: the error would scroll away above it */
    fprintf(stderr, "see 'sluice %s --help'\n", cmd);
    return 2;
}
