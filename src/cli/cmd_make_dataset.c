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

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice make-dataset --synthetic DIR [--images N "
               "(1000)] [--classes K (10)] [--seed S (0)]\n");
}

static int mkdir_p(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

int sl__cmd_make_dataset(int argc, char **argv)
{
    const char *dir = NULL;
    long long images = 1000, classes = 10;
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--synthetic") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(a, "--images") && i + 1 < argc)
            images = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(a, "--classes") && i + 1 < argc)
            classes = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(a, "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "make-dataset: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!dir || images < 1 || classes < 1 || classes > 100000 ||
        images > 100000000) {
        usage(stderr);
        return 2;
    }
    if (mkdir_p(dir)) {
        fprintf(stderr, "make-dataset: cannot create %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    for (long long c = 0; c < classes; c++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/class_%03lld", dir, c);
        if (mkdir_p(p)) {
            fprintf(stderr, "make-dataset: cannot create %s: %s\n", p,
                    strerror(errno));
            return 1;
        }
    }
    int tty = isatty(2);
    sl__bytes_t jpg = {0};
    double total = 0;
    int64_t t0 = sl__now_ns();
    int rc = 0;
    for (long long i = 0; i < images && !rc; i++) {
        int cls = (int)(i % classes);
        char err[256];
        if (sl__synth_jpeg(seed, cls, i, &jpg, err, sizeof err)) {
            fprintf(stderr, "make-dataset: %s\n", err);
            rc = 1;
            break;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/class_%03d/img_%05lld.jpg", dir, cls,
                 i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(jpg.p, 1, jpg.n, f) != jpg.n) {
            fprintf(stderr, "make-dataset: cannot write %s: %s\n", path,
                    strerror(errno));
            rc = 1;
        }
        if (f && fclose(f) && !rc) {
            fprintf(stderr, "make-dataset: cannot write %s\n", path);
            rc = 1;
        }
        total += (double)jpg.n;
        if (tty && (i % 16 == 15 || i + 1 == images))
            fprintf(stderr, "\r%lld/%lld images", i + 1, images);
    }
    if (tty)
        fprintf(stderr, "\n");
    if (!rc) {
        double sec = (sl__now_ns() - t0) / 1e9;
        printf("wrote %lld images in %lld classes to %s: %.1f MB, mean %.1f "
               "KB (%.1f s)\n",
               images, classes, dir, total / 1e6, total / images / 1e3, sec);
    }
    sl__bytes_free(&jpg);
    return rc;
}
