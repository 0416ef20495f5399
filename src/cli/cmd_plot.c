/* `sluice plot TELEMETRY.jsonl -o FILE.svg|FILE.png [--title T]`: draws a
 * `--telemetry` file (docs/TELEMETRY.md) as five stacked panels over t:
 * throughput, consumer stall, CPU, queue depths and knob values.
 *
 * We do not draw ourselves: the JSON Lines are reduced to a whitespace
 * separated table (NaN where a value is null or absent), a gnuplot script is
 * written beside it, and gnuplot (Debian: gnuplot-nox) renders it. Both temp
 * files are removed afterwards. Exit 0 drawn, 1 failure, 2 usage.
 *
 * The telemetry file is outside bytes (it may be truncated by a crash, edited
 * by hand or not be telemetry at all), so the scanner below validates JSON
 * grammar itself, bounds nesting and line length, and never reads past the
 * line it was given. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* Longer lines are counted as malformed without being kept in memory; real
 * telemetry lines are 2-4 KB (more with many cores in cpu_core). */
#define PLOT_MAX_LINE (1u << 20)
/* Deeper nesting is malformed: telemetry nests two levels, and the bound keeps
 * the recursive scanner's stack small whatever the input. */
#define PLOT_MAX_DEPTH 32

/* The table's columns, in order; column 1 (gnuplot numbering) is t. A dotted
 * name is a member of a top-level object. */
static const char *const cols[] = {
    "t",
    "samples_per_s",
    "stall_fraction",
    "cpu_self",
    "cpu_other",
    "cpu_total",
    "queue_depth.read",
    "queue_depth.decode",
    "queue_depth.batches",
    "knobs.read_threads",
    "knobs.decode_threads",
    "knobs.prefetch",
};
enum {
    C_T,
    C_SPS,
    C_STALL,
    C_CPU_SELF,
    C_CPU_OTHER,
    C_CPU_TOTAL,
    C_Q_READ,
    C_Q_DECODE,
    C_Q_BATCHES,
    C_K_READ,
    C_K_DECODE,
    C_K_PREFETCH,
    NCOLS
};

/* ---- JSON scanner ------------------------------------------------------ */

typedef struct {
    const char *p, *end;
    double v[NCOLS];
} scan_t;

static void skip_ws(scan_t *s)
{
    while (s->p < s->end &&
           (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

/* A string at s->p (the opening quote). Its raw bytes go to key (cap bytes,
 * NUL-terminated) when key is given; a key that does not fit, or holds
 * escapes, is stored as "" so that it matches no column. */
static int scan_string(scan_t *s, char *key, size_t cap)
{
    size_t n = 0;
    int plain = 1;
    s->p++;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p++;
        if (c == '"') {
            if (key)
                key[plain ? n : 0] = '\0';
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            plain = 0;
            if (s->p >= s->end)
                return -1;
            char e = *s->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, s->p++)
                    if (s->p >= s->end || !is_hex(*s->p))
                        return -1;
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return -1;
            }
            continue;
        }
        if (key && plain) {
            if (n + 1 < cap)
                key[n++] = (char)c;
            else
                plain = 0;
        }
    }
    return -1;
}

static int scan_digits(scan_t *s)
{
    const char *b = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > b ? 0 : -1;
}

/* A number in JSON's grammar (strtod alone would also take "inf", hex and
 * leading '+'). Its value goes to *out; one too long to copy is NaN. */
static int scan_number(scan_t *s, double *out)
{
    const char *b = s->p;
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (scan_digits(s))
        return -1;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (scan_digits(s))
            return -1;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (scan_digits(s))
            return -1;
    }
    char tmp[64];
    size_t len = (size_t)(s->p - b);
    if (len >= sizeof tmp) {
        *out = NAN;
        return 0;
    }
    memcpy(tmp, b, len);
    tmp[len] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
}

static int scan_literal(scan_t *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
        return -1;
    s->p += n;
    return 0;
}

static int col_of(const char *parent, const char *key)
{
    char name[160];
    if (parent)
        snprintf(name, sizeof name, "%s.%s", parent, key);
    else
        snprintf(name, sizeof name, "%s", key);
    for (int i = 0; i < NCOLS; i++)
        if (!strcmp(cols[i], name))
            return i;
    return -1;
}

/* One value. col >= 0: a number here is that column's value (null and other
 * types leave it NaN). name: the member's key when this value is a member of
 * the top-level object, so that its own members can be looked up as
 * "name.key"; NULL elsewhere. */
static int scan_value(scan_t *s, int depth, int col, const char *name);

static int scan_object(scan_t *s, int depth, const char *name)
{
    s->p++; /* '{' */
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        char key[64];
        skip_ws(s);
        if (s->p >= s->end || *s->p != '"' || scan_string(s, key, sizeof key))
            return -1;
        skip_ws(s);
        if (s->p >= s->end || *s->p++ != ':')
            return -1;
        /* Top level (depth 1): plain keys; depth 2: "name.key". */
        int col = -1;
        if (depth == 1)
            col = col_of(NULL, key);
        else if (depth == 2 && name)
            col = col_of(name, key);
        if (scan_value(s, depth, col, depth == 1 ? key : NULL))
            return -1;
        skip_ws(s);
        if (s->p >= s->end)
            return -1;
        char c = *s->p++;
        if (c == '}')
            return 0;
        if (c != ',')
            return -1;
    }
}

static int scan_array(scan_t *s, int depth)
{
    s->p++; /* '[' */
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 0;
    }
    for (;;) {
        if (scan_value(s, depth, -1, NULL))
            return -1;
        skip_ws(s);
        if (s->p >= s->end)
            return -1;
        char c = *s->p++;
        if (c == ']')
            return 0;
        if (c != ',')
            return -1;
    }
}

static int scan_value(scan_t *s, int depth, int col, const char *name)
{
    skip_ws(s);
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '{':
        if (depth >= PLOT_MAX_DEPTH)
            return -1;
        return scan_object(s, depth + 1, name);
    case '[':
        if (depth >= PLOT_MAX_DEPTH)
            return -1;
        return scan_array(s, depth + 1);
    case '"':
        return scan_string(s, NULL, 0);
    case 't':
        return scan_literal(s, "true");
    case 'f':
        return scan_literal(s, "false");
    case 'n':
        return scan_literal(s, "null");
    default: {
        double v;
        if (scan_number(s, &v))
            return -1;
        if (col >= 0)
            s->v[col] = v;
        return 0;
    }
    }
}

/* Parses one line into v[]. Returns 0 for one JSON object with a finite t,
 * -1 otherwise. */
static int scan_line(const char *line, size_t len, double v[NCOLS])
{
    scan_t s = {line, line + len, {0}};
    for (int i = 0; i < NCOLS; i++)
        s.v[i] = NAN;
    skip_ws(&s);
    if (s.p >= s.end || *s.p != '{' || scan_value(&s, 0, -1, NULL))
        return -1;
    skip_ws(&s);
    if (s.p != s.end || !isfinite(s.v[C_T]))
        return -1;
    memcpy(v, s.v, sizeof s.v);
    return 0;
}

/* ---- reading the file -------------------------------------------------- */

/* The next line of f without its '\n' in *buf (grown as needed, up to
 * PLOT_MAX_LINE). Returns its length, -2 for a line over the limit (consumed,
 * not kept), -1 at end of file. */
static long read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c, over = 0, any = 0;
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (over)
            continue;
        if (n >= PLOT_MAX_LINE) {
            over = 1;
            continue;
        }
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                over = 1;
                continue;
            }
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (!any)
        return -1;
    if (over)
        return -2;
    return (long)n;
}

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

typedef struct {
    long points, malformed, first_bad;
    double tmin, tmax;
    double max[NCOLS]; /* -INFINITY: the column has no value at all */
} table_t;

/* Reads the telemetry file in, writing the table to out. Returns 0, or -1
 * with errno when the input cannot be read. */
static int make_table(FILE *in, FILE *out, table_t *tb)
{
    char *buf = NULL;
    size_t cap = 0;
    long len, lineno = 0;
    memset(tb, 0, sizeof *tb);
    tb->tmin = INFINITY;
    tb->tmax = -INFINITY;
    for (int i = 0; i < NCOLS; i++)
        tb->max[i] = -INFINITY;
    fprintf(out, "#");
    for (int i = 0; i < NCOLS; i++)
        fprintf(out, " %s", cols[i]);
    fprintf(out, "\n");
    while ((len = read_line(in, &buf, &cap)) != -1) {
        lineno++;
        double v[NCOLS];
        if (len >= 0 && blank(buf, (size_t)len))
            continue;
        if (len < 0 || scan_line(buf, (size_t)len, v)) {
            if (!tb->malformed++)
                tb->first_bad = lineno;
            continue;
        }
        for (int i = 0; i < NCOLS; i++) {
            if (isfinite(v[i])) {
                fprintf(out, "%s%.9g", i ? " " : "", v[i]);
                if (v[i] > tb->max[i])
                    tb->max[i] = v[i];
            } else {
                fprintf(out, " NaN");
            }
        }
        fprintf(out, "\n");
        if (v[C_T] < tb->tmin)
            tb->tmin = v[C_T];
        if (v[C_T] > tb->tmax)
            tb->tmax = v[C_T];
        tb->points++;
    }
    int rc = ferror(in) ? -1 : 0;
    free(buf);
    return rc;
}

/* ---- the gnuplot script ------------------------------------------------ */

/* s as a gnuplot single-quoted string: no escapes there but '' for a quote;
 * control characters (a title from the shell may hold a newline) become
 * spaces. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'')
            fputs("''", f);
        else
            fputc(c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
    fputc('\'', f);
}

typedef struct {
    int col;           /* cols[] index */
    const char *title; /* legend */
    const char *expr;  /* gnuplot y expression, %d = the column; NULL: $col */
    const char *style; /* after "with" */
} series_t;

typedef struct {
    const char *ylabel;
    int percent; /* values are 0..1 shares, drawn as % */
    int nseries;
    series_t s[3];
} panel_t;

/* Colours: Okabe-Ito, readable for colour-blind readers and in grey. */
static const panel_t panels[5] = {
    {"samples/s",
     0,
     1,
     {{C_SPS, "samples_per_s", NULL, "lines lw 1.5 lc rgb '#0072B2'"}}},
    {"consumer stall (%)",
     1,
     1,
     {{C_STALL, "stall_fraction", "($%d*100)",
       "lines lw 1.5 lc rgb '#D55E00'"}}},
    {"CPU (% of machine)",
     1,
     3,
     {{C_CPU_TOTAL, "cpu_total", "($%d*100)",
       "lines lw 1 dt 2 lc rgb '#555555'"},
      {C_CPU_SELF, "cpu_self (sluice)", "($%d*100)",
       "lines lw 1.5 lc rgb '#0072B2'"},
      {C_CPU_OTHER, "cpu_other", "($%d*100)",
       "lines lw 1.5 lc rgb '#E69F00'"}}},
    {"queue depth (items)",
     0,
     3,
     {{C_Q_READ, "read (of 32)", NULL, "lines lw 1.5 lc rgb '#009E73'"},
      {C_Q_DECODE, "decode", NULL, "lines lw 1.5 lc rgb '#CC79A7'"},
      {C_Q_BATCHES, "batches ready", NULL, "lines lw 1.5 lc rgb '#0072B2'"}}},
    /* Knobs often hold equal values: widths shrink from the first drawn to
     * the last so a step under another stays visible. */
    {"knob value",
     0,
     3,
     {{C_K_READ, "read_threads", NULL, "steps lw 5 lc rgb '#56B4E9'"},
      {C_K_DECODE, "decode_threads", NULL, "steps lw 2.5 lc rgb '#D55E00'"},
      {C_K_PREFETCH, "prefetch", NULL, "steps lw 1.2 lc rgb '#000000'"}}},
};

static void write_script(FILE *f, const char *data, const char *out, int png,
                         const char *title, const table_t *tb)
{
    /* t counts from the loader's creation: start the axis at 0 unless the
     * file is a late excerpt of a long run. */
    double x0 = tb->tmin, x1 = tb->tmax;
    if (x0 > 0 && x0 < 0.05 * (x1 - x0))
        x0 = 0;
    if (!(x1 > x0)) { /* one point: gnuplot refuses an empty range */
        x0 -= 1;
        x1 += 1;
    }
    fprintf(f, "set terminal %s noenhanced size 1000,1150 font 'Sans,11'\n",
            png ? "pngcairo" : "svg");
    fprintf(f, "set output ");
    put_quoted(f, out);
    fprintf(f, "\nset multiplot layout 5,1 title ");
    put_quoted(f, title);
    /* Fixed margins: every panel's plot area lines up whatever the width of
     * its tic labels, and the right strip holds the legends. */
    fprintf(f,
            " font ',13' margins 0.09,0.78,0.06,0.94 spacing 0,0.018\n"
            "set xrange [%.9g:%.9g]\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set key outside right top Left reverse samplen 2.5\n"
            "set border lw 0.8\n"
            "set ytics nomirror\n",
            x0, x1);
    int dots = tb->points <= 100;
    for (int p = 0; p < 5; p++) {
        const panel_t *pn = &panels[p];
        int last = p == 4;
        fprintf(f, "\n# panel %d\n", p + 1);
        fprintf(f, "set ylabel ");
        put_quoted(f, pn->ylabel);
        fprintf(f, "\n");
        if (last)
            fprintf(f, "set format x '%%g'\nset xlabel 't (s)'\n");
        else
            fprintf(f, "set format x ''\nunset xlabel\n");
        /* y ranges are set here, not autoscaled: all these values are >= 0,
         * a line at 0 or at the top must not hide under the border, a
         * constant must not blow up to a band around itself, and shares
         * near 100 % read best on a 0..100 scale. */
        double top = -INFINITY;
        for (int i = 0; i < pn->nseries; i++)
            if (tb->max[pn->s[i].col] > top)
                top = tb->max[pn->s[i].col];
        if (pn->percent)
            top *= 100;
        if (!(top > 0))
            top = 1;
        if (pn->percent && top >= 50)
            top = 100;
        fprintf(f, "set yrange [%.6g:%.6g]\n", -0.04 * top, 1.08 * top);
        if (pn->percent && top == 100)
            fprintf(f, "set ytics 0, 20, 100\n");
        else if (last && top <= 8)
            fprintf(f, "set ytics 0, 1\n"); /* knobs are whole numbers */
        else
            fprintf(f, "set ytics autofreq\n");
        /* gnuplot stops at a plot whose points are all undefined, so a
         * column with no value is left out; a panel with none keeps its
         * frame, a clipped constant and a note. */
        int any = 0;
        for (int i = 0; i < pn->nseries; i++) {
            const series_t *se = &pn->s[i];
            if (!isfinite(tb->max[se->col]))
                continue;
            fprintf(f, "%s", any ? ", \\\n     " : "plot ");
            put_quoted(f, data);
            fprintf(f, " using 1:");
            if (se->expr)
                fprintf(f, se->expr, se->col + 1);
            else
                fprintf(f, "%d", se->col + 1);
            /* A value between two nulls is no segment: with few points,
             * mark each one so that lone values still show. */
            if (dots && !strncmp(se->style, "lines ", 6))
                fprintf(f, " with linespoints pt 7 ps 0.5 %s title ",
                        se->style + 6);
            else
                fprintf(f, " with %s title ", se->style);
            put_quoted(f, se->title);
            any = 1;
        }
        if (!any)
            fprintf(f, "set yrange [0:1]\n"
                       "set label 1 'no data' at graph 0.5, 0.5 center\n"
                       "plot -1 notitle\n"
                       "unset label 1");
        fprintf(f, "\n");
    }
    fprintf(f, "\nunset multiplot\nunset output\n");
}

/* ---- running gnuplot --------------------------------------------------- */

/* Runs `gnuplot -d script` with its stderr to errpath. Returns its exit
 * status (128 + signal when killed), or -1 with errno when it cannot be
 * started (ENOENT: not installed). */
static int run_gnuplot(const char *script, const char *errpath)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa))
        return -1;
    posix_spawn_file_actions_addopen(&fa, 2, errpath,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* -d: ignore ~/.gnuplot and the system init file. */
    char *argv[] = {"gnuplot", "-d", (char *)script, NULL};
    pid_t pid;
    int e = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) {
        errno = e;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void copy_to_stderr(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char b[4096];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0)
        fwrite(b, 1, n, stderr);
    fclose(f);
}

/* ---- the command ------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice plot TELEMETRY.jsonl -o FILE.svg|FILE.png "
               "[--title T]\n"
               "  TELEMETRY.jsonl  written by `sluice run --telemetry FILE`\n"
               "  -o, --output F   .svg or .png: five panels over t: "
               "samples/s, stall %%,\n"
               "                   CPU %% (self, other, total), queue depths, "
               "knob values\n"
               "  -t, --title T    title (default: the telemetry file's name)\n"
               "needs gnuplot (Debian: apt-get install gnuplot-nox)\n");
}

/* 1 png, 0 svg, -1 other (case-insensitive extension). */
static int out_kind(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/'))
        return -1;
    if (!strcasecmp(dot, ".png"))
        return 1;
    if (!strcasecmp(dot, ".svg"))
        return 0;
    return -1;
}

/* A temp file from tmpl (ending in XXXXXX), or NULL with errno. */
static FILE *temp_file(char *tmpl)
{
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmpl);
        errno = e;
    }
    return f;
}

/* The three temp files of one plot: the table, the script, gnuplot's
 * stderr. A path is set only once its file exists. */
typedef struct {
    char data[4096], script[4096], err[4096];
    int have_data, have_script, have_err;
} temps_t;

static void temps_remove(temps_t *t)
{
    /* Kept with SLUICE_PLOT_KEEP=1, to debug a script by hand. */
    int keep = getenv("SLUICE_PLOT_KEEP") != NULL;
    if (keep && (t->have_data || t->have_script))
        fprintf(stderr, "sluice plot: kept %s and %s\n",
                t->have_data ? t->data : "-", t->have_script ? t->script : "-");
    if (t->have_data && !keep)
        unlink(t->data);
    if (t->have_script && !keep)
        unlink(t->script);
    if (t->have_err)
        unlink(t->err);
}

/* Reads in_path, draws it to out. Returns the exit status. */
static int plot(const char *in_path, const char *out, int png,
                const char *title, temps_t *t)
{
    FILE *in = fopen(in_path, "r");
    if (!in) {
        fprintf(stderr, "sluice plot: cannot open %s: %s\n", in_path,
                strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sluice plot: %s is a directory\n", in_path);
        fclose(in);
        return 1;
    }
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir)
        tmpdir = "/tmp";
    int n1 = snprintf(t->data, sizeof t->data, "%s/sluice-plot-XXXXXX", tmpdir);
    snprintf(t->script, sizeof t->script, "%s/sluice-plot-XXXXXX", tmpdir);
    snprintf(t->err, sizeof t->err, "%s/sluice-plot-XXXXXX", tmpdir);
    if (n1 < 0 || (size_t)n1 >= sizeof t->data) {
        fprintf(stderr, "sluice plot: TMPDIR too long\n");
        fclose(in);
        return 1;
    }

    table_t tb;
    FILE *df = temp_file(t->data);
    if (!df) {
        fprintf(stderr, "sluice plot: cannot create a temp file in %s: %s\n",
                tmpdir, strerror(errno));
        fclose(in);
        return 1;
    }
    t->have_data = 1;
    int rerr = make_table(in, df, &tb);
    int re = errno;
    fclose(in);
    if (rerr) {
        fclose(df);
        fprintf(stderr, "sluice plot: reading %s: %s\n", in_path, strerror(re));
        return 1;
    }
    if (ferror(df) | fclose(df)) {
        fprintf(stderr, "sluice plot: writing %s: %s\n", t->data,
                strerror(errno));
        return 1;
    }
    if (tb.malformed)
        fprintf(stderr,
                "sluice plot: %s: skipped %ld malformed line%s (first: line "
                "%ld)\n",
                in_path, tb.malformed, tb.malformed == 1 ? "" : "s",
                tb.first_bad);
    if (!tb.points) {
        fprintf(stderr,
                "sluice plot: %s: no valid telemetry lines (JSON objects "
                "with a numeric \"t\")\n",
                in_path);
        return 1;
    }

    char deftitle[512];
    if (!title) {
        const char *base = strrchr(in_path, '/');
        snprintf(deftitle, sizeof deftitle, "sluice telemetry: %s",
                 base ? base + 1 : in_path);
        title = deftitle;
    }
    FILE *sf = temp_file(t->script);
    if (!sf) {
        fprintf(stderr, "sluice plot: cannot create a temp file in %s: %s\n",
                tmpdir, strerror(errno));
        return 1;
    }
    t->have_script = 1;
    write_script(sf, t->data, out, png, title, &tb);
    if (ferror(sf) | fclose(sf)) {
        fprintf(stderr, "sluice plot: writing %s: %s\n", t->script,
                strerror(errno));
        return 1;
    }
    int efd = mkstemp(t->err);
    if (efd < 0) {
        fprintf(stderr, "sluice plot: cannot create a temp file in %s: %s\n",
                tmpdir, strerror(errno));
        return 1;
    }
    close(efd);
    t->have_err = 1;

    int g = run_gnuplot(t->script, t->err);
    if (g < 0) {
        if (errno == ENOENT)
            fprintf(stderr,
                    "sluice plot: gnuplot not found in PATH; install it "
                    "(Debian/Ubuntu: apt-get install gnuplot-nox)\n");
        else
            fprintf(stderr, "sluice plot: cannot run gnuplot: %s\n",
                    strerror(errno));
        return 1;
    }
    struct stat os;
    if (g != 0 || stat(out, &os) != 0 || os.st_size == 0) {
        copy_to_stderr(t->err);
        if (g != 0)
            fprintf(stderr, "sluice plot: gnuplot failed (exit status %d)\n",
                    g);
        else
            fprintf(stderr, "sluice plot: gnuplot wrote nothing to %s\n", out);
        unlink(out); /* no half-drawn picture */
        return 1;
    }
    printf("wrote %s (%s, %ld points, t %.2f..%.2f s)\n", out,
           png ? "PNG" : "SVG", tb.points, tb.tmin, tb.tmax);
    return 0;
}

int sl__cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"title", 1, 0, 't'},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:t:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 't':
            title = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || !out) {
        fprintf(stderr, "sluice plot: %s\n",
                optind >= argc ? "no telemetry file given"
                : !out         ? "no output given (-o FILE.svg|FILE.png)"
                               : "one telemetry file at a time");
        usage(stderr);
        return 2;
    }
    int png = out_kind(out);
    if (png < 0) {
        fprintf(stderr,
                "sluice plot: %s: unknown output type; name it .svg or .png\n",
                out);
        return 2;
    }
    temps_t t = {0};
    int rc = plot(argv[optind], out, png, title, &t);
    temps_remove(&t);
    return rc;
}
