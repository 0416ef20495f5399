/* `sluice index SPEC [--out DIR]`: writes the sidecar index (NAME.slidx,
 * data/recidx) of each WebDataset tar or TFRecord file SPEC names (a path,
 * a brace pattern, URLs), so that a reader at a URL indexes the file with
 * one small request instead of fetching it whole at open. Each file is
 * walked as a reader walks it. A local file's sidecar goes beside it; a
 * URL's into DIR (made if missing, with the folders above it; then
 * copied beside the file on the server). A damaged file (bad samples, or
 * cut short) still gets its sidecar: it records what a reader's own walk
 * finds, damage included, so a reader skips or fails on the same samples
 * with it or without it. Exit 0 clean, 1 when a file could not be indexed
 * or is damaged (as `sluice verify` exits 1 on damage), 2 usage.
 * Ctrl-C, SIGTERM or SIGHUP (cli/stopsig) stop it between files: the
 * sidecar being written is finished or never begun, so no NAME.slidx.tmp
 * is left (a signal landing in the write's fsync left one), and it exits
 * 128 + the signal (130, 143, 129). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base.h"
#include "cli.h"
#include "data/recidx.h"
#include "data/recset.h"
#include "data/remote_parse.h"
#include "opts.h"
#include "stopsig.h"

typedef struct index_args {
    const char *out;
} index_args_t;

#define F(x) offsetof(index_args_t, x)
static const sl__opt_t index_opts[] = {
    {"out", 'o', SL__OPT_STR, F(out), 0, 0, "DIR",
     "sidecars into DIR, made if missing (needed for URLs)"},
    {NULL},
};
#undef F
static const sl__opts_t index_usage = {
    "SPEC [--out DIR]",
    "  SPEC: WebDataset tars or TFRecord files: a path, a brace pattern\n"
    "        (shard-{000000..000099}.tar), URLs; as `run` takes them\n"
    "  writes NAME.slidx beside each file (or into DIR): what a reader of\n"
    "  the file at a URL needs instead of fetching it whole at open;\n"
    "  exit 1 when a file is damaged (its sidecar is still written)\n",
    {index_opts},
    "one SPEC",
    1,
    1};

int sl__cmd_index(int argc, char **argv)
{
    index_args_t a = {0};
    int rc = sl__opts_parse(&index_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    const char *spec = argv[optind], *files;
    int fmt = sl__recset_format(spec, &files);
    if (!fmt)
        return sl__opts_bad(&index_usage, "index",
                            "%s: not WebDataset (.tar) or TFRecord files; "
                            "name the format: webdataset:%s or tfrecord:%s",
                            spec, spec, spec);
    char err[2048], **names = NULL;
    int n = 0, failed = 0, damaged = 0;
    /* DIR and the folders above it, as pack makes OUT's */
    if (a.out && sl__mkdir_p(a.out)) {
        sl__cli_error("index", "%s: cannot create: %s", a.out, strerror(errno));
        return 1;
    }
    if (sl__recset_names(files, &names, &n, err, sizeof err)) {
        sl__cli_error("index", "%s", err);
        return 1;
    }
    /* A walk is not cut short (no sidecar is written during it): a second
     * signal quits at once, which then leaves nothing behind either. */
    sl__stop_catch("\nsluice index: stopping after the file being read "
                   "(again to quit at once)\n");
    int done = 0;
    for (int i = 0; i < n && !sl__stop_signal(); i++) {
        int url = sl__remote_is_url(names[i]);
        if (url && !a.out) {
            sl__cli_error("index", "%s: a URL: name a folder with --out",
                          names[i]);
            failed = 1;
            break;
        }
        char *dst = NULL, *copy = strdup(names[i]);
        if (!copy || !(dst = a.out ? sl__path_join(a.out, basename(copy))
                                   : strdup(names[i]))) {
            free(copy);
            sl__cli_error("index", "out of memory");
            failed = 1;
            break;
        }
        free(copy);
        sl__recfile_t *f = NULL;
        int walked = !sl__recfile_walk(names[i], fmt, &f, err, sizeof err);
        if (walked && sl__stop_signal()) { /* stopped while it was read */
            sl__recfile_close(f);
            free(dst);
            break;
        }
        if (!walked || sl__recidx_save(f, dst, err, sizeof err)) {
            sl__cli_error("index", "%s", err);
            failed = 1;
        } else {
            /* stdout too: names (and the damage, which quotes them) may
             * hold any byte */
            char *line = NULL, *shown = NULL;
            if (asprintf(&line, "%s: %lld samples (%lld bad)%s%s -> %s%s",
                         names[i], (long long)f->n, (long long)f->nbad,
                         f->damage ? ", damaged: " : "",
                         f->damage ? f->damage : "", dst,
                         SL__RECIDX_SUFFIX) >= 0)
                shown = sl__msg_escape_dup(line);
            printf("%s\n", shown ? shown : "(a line lost: out of memory)");
            free(shown);
            free(line);
            damaged += f->nbad > 0 || f->damage;
            done++;
        }
        sl__recfile_close(f);
        free(dst);
    }
    sl__strv_free(names, n);
    int sig = sl__stop_signal();
    if (sig) {
        sl__cli_error("index",
                      "interrupted (%s): %d of %d files indexed, their "
                      "sidecars whole; no other sidecar written",
                      sl__stop_name(sig), done, n);
        return 128 + sig;
    }
    if (damaged)
        sl__cli_error("index",
                      "%d of %d files damaged (their sidecars written: a "
                      "reader finds the same damage)",
                      damaged, n);
    return failed || damaged;
}
