/* sluice make-dataset --synthetic DIR [--images N] [--classes K] [--seed S]
 *
 * Writes an ImageFolder tree DIR/class_XXX/img_XXXXX.jpg of the
 * photo-like JPEGs of ops/synth.h (image i is of class i mod K). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "ops/synth.h"
#include "opts.h"
#include "stopsig.h"

typedef struct make_args {
    const char *dir;
    int64_t images, classes;
    uint64_t seed;
} make_args_t;

#define F(f) offsetof(make_args_t, f)
static const sl__opt_t make_opts[] = {
    {"synthetic", 0, SL__OPT_STR, F(dir), 0, 0, "DIR",
     "write DIR/class_XXX/img_XXXXX.jpg", .need = 1},
    {"images", 0, SL__OPT_I64, F(images), 1, 100000000, "N", "images", "1000"},
    {"classes", 0, SL__OPT_I64, F(classes), 1, 100000, "K",
     "classes (image i is of class i mod K)", "10"},
    {"seed", 0, SL__OPT_U64, F(seed), 0, 0, "S", "random seed", "0"},
    {NULL},
};

static const sl__opts_t make_usage = {
    "--synthetic DIR [options]", NULL, {make_opts}};

/* After a failure (a full disk) or a stop signal: removes images 0..n-1
 * (the one being written too), the class folders left empty and DIR if
 * this run made it, so what was there before is all that stays. */
static void remove_written(const char *dir, long long classes, long long n,
                           int made_dir)
{
    char path[4096];
    for (long long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/class_%03lld/img_%05lld.jpg", dir,
                 i % classes, i);
        unlink(path);
    }
    for (long long c = 0; c < classes; c++) {
        snprintf(path, sizeof path, "%s/class_%03lld", dir, c);
        rmdir(path); /* fails, as it should, when it holds other files */
    }
    if (made_dir)
        rmdir(dir);
    sl__cli_error("make-dataset", "failed; %s is as it was", dir);
}

int sl__cmd_make_dataset(int argc, char **argv)
{
    make_args_t a = {.images = 1000, .classes = 10};
    int rc = sl__opts_parse(&make_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    const char *dir = a.dir;
    long long images = a.images, classes = a.classes;
    unsigned long long seed = a.seed;
    sl__stop_catch("\nsluice make-dataset: stopping: removing the images "
                   "written (again to quit at once)\n");
    struct stat dst;
    int made_dir = stat(dir, &dst) != 0;
    if (sl__mkdir_p(dir)) {
        sl__cli_error("make-dataset", "cannot create %s: %s", dir,
                      strerror(errno));
        return 1;
    }
    for (long long c = 0; c < classes; c++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/class_%03lld", dir, c);
        if (sl__mkdir_p(p)) {
            sl__cli_error("make-dataset", "cannot create %s: %s", p,
                          strerror(errno));
            return 1;
        }
    }
    int tty = isatty(2);
    sl__bytes_t jpg = {0};
    double total = 0;
    int64_t t0 = sl__now_ns();
    rc = 0;
    long long i = 0;
    for (; i < images && !rc; i++) {
        int cls = (int)(i % classes);
        char err[256];
        if (sl__stop_signal()) {
            sl__cli_error("make-dataset", "interrupted (%s)",
                          sl__stop_name(sl__stop_signal()));
            rc = 128 + sl__stop_signal();
            break;
        }
        if (sl__synth_jpeg(seed, cls, i, &jpg, err, sizeof err)) {
            sl__cli_error("make-dataset", "%s", err);
            rc = 1;
            break;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/class_%03d/img_%05lld.jpg", dir, cls,
                 i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(jpg.p, 1, jpg.n, f) != jpg.n) {
            sl__cli_error("make-dataset", "cannot write %s: %s", path,
                          strerror(errno));
            rc = 1;
        }
        if (f && fclose(f) && !rc) {
            sl__cli_error("make-dataset", "cannot write %s", path);
            rc = 1;
        }
        total += (double)jpg.n;
        if (tty && (i % 16 == 15 || i + 1 == images))
            fprintf(stderr, "\r%lld/%lld images", i + 1, images);
    }
    if (tty)
        fprintf(stderr, "\n");
    if (rc) /* no partial set, nor a cut image, that a run would take */
        remove_written(dir, classes, i, made_dir);
    if (!rc) {
        double sec = (sl__now_ns() - t0) / 1e9;
        printf("wrote %lld images in %lld classes to %s: %.1f MB, mean %.1f "
               "KB (%.1f s)\n",
               images, classes, dir, total / 1e6, total / images / 1e3, sec);
    }
    sl__bytes_free(&jpg);
    return rc;
}
