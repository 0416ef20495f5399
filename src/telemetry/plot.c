/* plot: the temp files (table, script, gnuplot's stderr) and the gnuplot
 * run. See plot.h. */
#include "telemetry/plot.h"

#include <errno.h>
#include <fcntl.h>
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

/* The three temp files of one plot: the table, the script, gnuplot's
 * stderr. A path is set only once its file exists. */
typedef struct {
    char data[4096], script[4096], err[4096];
    int have_data, have_script, have_err;
} temps_t;

static void temps_remove(const sl__plot_opts_t *o, temps_t *t)
{
    if (o->keep_temps && (t->have_data || t->have_script))
        say(o, "kept %s and %s", t->have_data ? t->data : "-",
            t->have_script ? t->script : "-");
    if (t->have_data && !o->keep_temps)
        unlink(t->data);
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

/* The table of o->input at t->data. */
static int make_table(const sl__plot_opts_t *o, const char *tmpdir, temps_t *t,
                      sl__plot_table_t *tb, char *err, size_t errlen)
{
    FILE *in = fopen(o->input, "r");
    if (!in)
        return sl__fail(err, errlen, SL_EIO, "cannot open %s: %s", o->input,
                        strerror(errno));
    struct stat st;
    if (fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(in);
        return sl__fail(err, errlen, SL_EIO, "%s is a directory", o->input);
    }
    FILE *df = temp_file(t->data);
    if (!df) {
        int rc = no_temp(tmpdir, err, errlen);
        fclose(in);
        return rc;
    }
    t->have_data = 1;
    int rerr = sl__plot_table_write(in, df, tb);
    int re = errno;
    fclose(in);
    if (rerr) {
        fclose(df);
        return sl__fail(err, errlen, SL_EIO, "reading %s: %s", o->input,
                        strerror(re));
    }
    return close_written(df, t->data, err, errlen);
}

/* Runs gnuplot on t->script; checks that it drew o->output. */
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
    if (g == 0 && stat(o->output, &os) == 0 && os.st_size > 0)
        return 0;
    copy_file(t->err, o->log);
    unlink(o->output); /* no half-drawn picture */
    if (g != 0)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "gnuplot failed (exit status %d)", g);
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "gnuplot wrote nothing to %s",
                    o->output);
}

static int plot(const sl__plot_opts_t *o, temps_t *t, sl__plot_table_t *tb,
                char *err, size_t errlen)
{
    const char *tmpdir = o->tmpdir && *o->tmpdir ? o->tmpdir : "/tmp";
    int n1 = snprintf(t->data, sizeof t->data, "%s/sluice-plot-XXXXXX", tmpdir);
    snprintf(t->script, sizeof t->script, "%s/sluice-plot-XXXXXX", tmpdir);
    snprintf(t->err, sizeof t->err, "%s/sluice-plot-XXXXXX", tmpdir);
    if (n1 < 0 || (size_t)n1 >= sizeof t->data)
        return sl__fail(err, errlen, SL_EINVAL, "TMPDIR too long");
    int rc = make_table(o, tmpdir, t, tb, err, errlen);
    if (rc)
        return rc;
    if (tb->st.malformed)
        say(o, "%s: skipped %ld malformed line%s (first: line %ld)", o->input,
            tb->st.malformed, tb->st.malformed == 1 ? "" : "s",
            tb->st.first_bad);
    if (!tb->st.points)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: no valid telemetry lines (JSON objects with a "
                        "numeric \"t\")",
                        o->input);

    char deftitle[512];
    const char *title = o->title;
    if (!title) {
        const char *base = strrchr(o->input, '/');
        snprintf(deftitle, sizeof deftitle, "sluice telemetry: %s",
                 base ? base + 1 : o->input);
        title = deftitle;
    }
    FILE *sf = temp_file(t->script);
    if (!sf)
        return no_temp(tmpdir, err, errlen);
    t->have_script = 1;
    sl__plot_script_write(sf, t->data, o->output, o->png, o->raw, title, tb);
    if ((rc = close_written(sf, t->script, err, errlen)))
        return rc;
    int efd = mkstemp(t->err);
    if (efd < 0)
        return no_temp(tmpdir, err, errlen);
    close(efd);
    t->have_err = 1;
    return draw(o, t, err, errlen);
}

int sl__plot(const sl__plot_opts_t *o, sl__plot_stats_t *st, char *err,
             size_t errlen)
{
    temps_t t;
    memset(&t, 0, sizeof t);
    sl__plot_table_t tb;
    memset(&tb, 0, sizeof tb);
    int rc = plot(o, &t, &tb, err, errlen);
    temps_remove(o, &t);
    if (st)
        *st = tb.st;
    return rc;
}
