/* plot: the temp files (table, script, gnuplot's stderr) and the gnuplot
 * run. See plot.h. */
#include "telemetry/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "telemetry/plot_internal.h"

extern char **environ;

/* A line on o->log after its prefix. */
static void say(const sl__plot_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const sl__plot_opts_t *o, const char *fmt, ...)
{
    if (!o->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(o->log_prefix ? o->log_prefix : "", o->log);
    vfprintf(o->log, fmt, ap);
    fputc('\n', o->log);
    va_end(ap);
}

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

static void copy_file(const char *path, FILE *to)
{
    FILE *f = to ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char b[4096];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0)
        fwrite(b, 1, n, to);
    fclose(f);
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

/* The temp files of one plot: the tables (one a run), the script,
 * gnuplot's stderr. have_data counts the tables that exist; a path is set
 * only once its file exists. */
typedef struct {
    char data[SL__PLOT_MAX_RUNS][4096], script[4096], err[4096];
    int have_data, have_script, have_err;
} temps_t;

static void temps_remove(const sl__plot_opts_t *o, temps_t *t)
{
    if (o->keep_temps && (t->have_data || t->have_script))
        say(o, "kept %s%s and %s", t->have_data ? t->data[0] : "-",
            t->have_data > 1 ? " (and the other runs' tables)" : "",
            t->have_script ? t->script : "-");
    for (int i = 0; i < t->have_data && !o->keep_temps; i++)
        unlink(t->data[i]);
    if (t->have_script && !o->keep_temps)
        unlink(t->script);
    if (t->have_err)
        unlink(t->err);
}

/* Closes f, written to path. Returns 0 or SL_EIO with the message. */
static int close_written(FILE *f, const char *path, char *err, size_t errlen)
{
    if (ferror(f) | fclose(f))
        return sl__fail(err, errlen, SL_EIO, "writing %s: %s", path,
                        strerror(errno));
    return 0;
}

static int no_temp(const char *tmpdir, char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_EIO, "cannot create a temp file in %s: %s",
                    tmpdir, strerror(errno));
}

/* The table of telemetry file `input` at t's next data path, checked: a
 * warning for skipped lines, an error for none valid. */
static int make_table(const sl__plot_opts_t *o, const char *input,
                      const char *tmpdir, temps_t *t, sl__plot_table_t *tb,
                      char *err, size_t errlen)
{
    char *path = t->data[t->have_data];
    int n1 = snprintf(path, sizeof t->data[0], "%s/sluice-plot-XXXXXX", tmpdir);
    if (n1 < 0 || (size_t)n1 >= sizeof t->data[0])
        return sl__fail(err, errlen, SL_EINVAL, "TMPDIR too long");
    /* A regular file, or a pipe (`sluice plot <(ssh host cat t.jsonl)`).
     * O_NONBLOCK: a FIFO's open does not wait for a writer; read blocking
     * after it, one with no writer reads as empty at once (never a hang).
     * A device (/dev/zero: no end) or folder is refused. */
    int fd = open(input, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return sl__fail(err, errlen, SL_EIO, "cannot open %s: %s", input,
                        strerror(errno));
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode)
                   ? sl__fail(err, errlen, SL_EIO, "%s is a directory", input)
                   : sl__fail(err, errlen, SL_EIO,
                              "%s: not a regular file (%s)", input,
                              sl__file_type_name((unsigned)st.st_mode));
    }
    FILE *in = fdopen(fd, "r");
    if (!in) {
        close(fd);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    FILE *df = temp_file(path);
    if (!df) {
        int rc = no_temp(tmpdir, err, errlen);
        fclose(in);
        return rc;
    }
    t->have_data++;
    int rerr = sl__plot_table_write(in, df, tb);
    int re = errno;
    fclose(in);
    if (rerr) {
        fclose(df);
        return sl__fail(err, errlen, SL_EIO, "reading %s: %s", input,
                        strerror(re));
    }
    int rc = close_written(df, path, err, errlen);
    if (rc)
        return rc;
    if (tb->st.malformed)
        say(o, "%s: skipped %ld malformed line%s (first: line %ld)", input,
            tb->st.malformed, tb->st.malformed == 1 ? "" : "s",
            tb->st.first_bad);
    if (!tb->st.points)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: no valid telemetry lines (JSON objects with a "
                        "numeric \"t\")",
                        input);
    return 0;
}

/* The script at t->script, written by write(f, arg). */
static int make_script(const char *tmpdir, temps_t *t,
                       void (*write)(FILE *, const void *), const void *arg,
                       char *err, size_t errlen)
{
    FILE *sf = temp_file(t->script);
    if (!sf)
        return no_temp(tmpdir, err, errlen);
    t->have_script = 1;
    write(sf, arg);
    int rc = close_written(sf, t->script, err, errlen);
    if (rc)
        return rc;
    int efd = mkstemp(t->err);
    if (efd < 0)
        return no_temp(tmpdir, err, errlen);
    close(efd);
    t->have_err = 1;
    return 0;
}

/* 1 when the picture at path ends as a whole one does: a PNG with its
 * IEND chunk, an SVG with its closing tag. gnuplot does not check its
 * writes: on a full disk it exits 0 with the picture cut short. */
static int picture_whole(const char *path, int png, off_t size)
{
    static const unsigned char iend[12] = {0,   0,   0,    0,    'I',  'E',
                                           'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    unsigned char tail[64];
    size_t want = size < (off_t)sizeof tail ? (size_t)size : sizeof tail;
    FILE *f = fopen(path, "rb");
    int ok = f && fseeko(f, size - (off_t)want, SEEK_SET) == 0 &&
             fread(tail, 1, want, f) == want;
    if (f)
        fclose(f);
    if (!ok)
        return 0;
    if (png)
        return want >= sizeof iend &&
               !memcmp(tail + want - sizeof iend, iend, sizeof iend);
    while (want && (tail[want - 1] == '\n' || tail[want - 1] == ' '))
        want--;
    return want >= 6 && !memcmp(tail + want - 6, "</svg>", 6);
}

/* Runs gnuplot on t->script; checks that it drew o->output, whole. */
static int draw(const sl__plot_opts_t *o, temps_t *t, char *err, size_t errlen)
{
    int g = run_gnuplot(t->script, t->err);
    if (g < 0 && errno == ENOENT)
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "gnuplot not found in PATH; install it "
                        "(Debian/Ubuntu: apt-get install gnuplot-nox)");
    if (g < 0)
        return sl__fail(err, errlen, SL_EIO, "cannot run gnuplot: %s",
                        strerror(errno));
    struct stat os;
    int have = g == 0 && stat(o->output, &os) == 0 && os.st_size > 0;
    if (have && picture_whole(o->output, o->png, os.st_size))
        return 0;
    copy_file(t->err, o->log);
    unlink(o->output); /* no half-drawn picture */
    if (g != 0)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "gnuplot failed (exit status %d)", g);
    if (have) /* gnuplot does not check its writes: most likely no room */
        return sl__fail(err, errlen, SL_EIO,
                        "%s: the picture gnuplot wrote was cut short at %lld "
                        "bytes (the disk full?); removed",
                        o->output, (long long)os.st_size);
    return sl__fail(err, errlen, SL_EUNSUPPORTED,
                    "gnuplot wrote nothing to %s (the disk full?)", o->output);
}

/* The name a file gets in a title or legend: its last path part. */
static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b && b[1] ? b + 1 : path;
}

typedef struct {
    const sl__plot_opts_t *o;
    const temps_t *t;
    const sl__plot_table_t *tb;
    const char *title;
} one_t;

static void write_one(FILE *f, const void *arg)
{
    const one_t *a = arg;
    sl__plot_script_write(f, a->t->data[0], a->o->output, a->o->png, a->o->raw,
                          a->title, a->tb);
}

typedef struct {
    const sl__plot_opts_t *o;
    const char *data[SL__PLOT_MAX_RUNS], *labels[SL__PLOT_MAX_RUNS];
    const sl__plot_table_t *tb;
    const char *title;
} cmp_t;

static void write_cmp(FILE *f, const void *arg)
{
    const cmp_t *a = arg;
    sl__plot_compare_script_write(f, a->data, a->labels, a->tb, a->o->ninputs,
                                  a->o->output, a->o->png, a->title);
}

/* The picture can be written where asked (checked before any work, so the
 * cause is named, not gnuplot's failure on its temporary script): its
 * folder exists and takes the file. A file made for the check goes. */
static int output_writable(const char *path, char *err, size_t errlen)
{
    struct stat st;
    int existed = stat(path, &st) == 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot write: %s", path,
                        strerror(errno));
    close(fd);
    if (!existed)
        unlink(path);
    return 0;
}

/* Draws o: one run (tb[0]) or o->ninputs compared (tb[0..ninputs)). */
static int plot(const sl__plot_opts_t *o, temps_t *t, sl__plot_table_t *tb,
                char *err, size_t errlen)
{
    int rc = output_writable(o->output, err, errlen);
    if (rc)
        return rc;
    const char *tmpdir = o->tmpdir && *o->tmpdir ? o->tmpdir : "/tmp";
    int n1 =
        snprintf(t->script, sizeof t->script, "%s/sluice-plot-XXXXXX", tmpdir);
    snprintf(t->err, sizeof t->err, "%s/sluice-plot-XXXXXX", tmpdir);
    if (n1 < 0 || (size_t)n1 >= sizeof t->script)
        return sl__fail(err, errlen, SL_EINVAL, "TMPDIR too long");
    int runs = o->ninputs >= 2 ? o->ninputs : 1;
    if (runs > SL__PLOT_MAX_RUNS)
        return sl__fail(err, errlen, SL_EINVAL,
                        "%d files to compare: at most %d", runs,
                        SL__PLOT_MAX_RUNS);
    for (int i = 0; i < runs; i++)
        if ((rc = make_table(o, runs > 1 ? o->inputs[i] : o->input, tmpdir, t,
                             &tb[i], err, errlen)))
            return rc;
    char deftitle[512];
    if (runs == 1) {
        one_t a = {o, t, tb, o->title};
        if (!a.title) {
            snprintf(deftitle, sizeof deftitle, "sluice telemetry: %s",
                     base_name(o->input));
            a.title = deftitle;
        }
        rc = make_script(tmpdir, t, write_one, &a, err, errlen);
    } else {
        cmp_t a = {o, {NULL}, {NULL}, tb, o->title};
        size_t used = (size_t)snprintf(deftitle, sizeof deftitle,
                                       "sluice telemetry compared:");
        for (int i = 0; i < runs; i++) {
            a.data[i] = t->data[i];
            a.labels[i] = o->labels && o->labels[i] ? o->labels[i]
                                                    : base_name(o->inputs[i]);
            if (used < sizeof deftitle)
                used +=
                    (size_t)snprintf(deftitle + used, sizeof deftitle - used,
                                     "%s %s", i ? "," : "", a.labels[i]);
        }
        if (!a.title)
            a.title = deftitle;
        rc = make_script(tmpdir, t, write_cmp, &a, err, errlen);
    }
    return rc ? rc : draw(o, t, err, errlen);
}

int sl__plot(const sl__plot_opts_t *o, sl__plot_stats_t *st, char *err,
             size_t errlen)
{
    temps_t *t = calloc(1, sizeof *t);
    sl__plot_table_t *tb = calloc(SL__PLOT_MAX_RUNS, sizeof *tb);
    if (!t || !tb) {
        free(t);
        free(tb);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = plot(o, t, tb, err, errlen);
    temps_remove(o, t);
    for (int i = 0; i < SL__PLOT_MAX_RUNS; i++)
        sl__plot_table_free(&tb[i]);
    if (st) {
        *st = tb[0].st;
        for (int i = 1; i < o->ninputs && i < SL__PLOT_MAX_RUNS; i++) {
            st->points += tb[i].st.points;
            st->malformed += tb[i].st.malformed;
            st->samples += tb[i].st.samples;
            st->seconds += tb[i].st.seconds;
            st->tmin = fmin(st->tmin, tb[i].st.tmin);
            st->tmax = fmax(st->tmax, tb[i].st.tmax);
        }
    }
    free(t);
    free(tb);
    return rc;
}
