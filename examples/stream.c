/* examples/stream.c: stream batches from a dataset with libsluice and print
 * each batch's shape and the throughput. Uses only the installed public
 * header; build it against an installed sluice with either
 *   cc stream.c $(pkg-config --cflags --libs sluice) -o stream
 * or examples/CMakeLists.txt (find_package(sluice), sluice::sluice).
 *
 *   stream DIR [BATCHES [BATCH_SIZE [IMAGE_SIZE]]]
 *
 * DIR: an ImageFolder tree, a folder of packed shards or one shard file
 * (`sluice make-dataset --synthetic DIR` makes one). Exit status 0 when
 * every batch asked for (or the whole epoch) streamed. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <sluice/sluice.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int arg(int argc, char **argv, int i, int dflt)
{
    return argc > i ? atoi(argv[i]) : dflt;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s DIR [BATCHES [BATCH_SIZE [IMAGE_SIZE]]]\n",
                argv[0]);
        return 2;
    }
    int want = arg(argc, argv, 2, 10);
    sl_options_t opt;
    sl_options_init(&opt); /* zero fields take their defaults */
    opt.batch_size = arg(argc, argv, 3, 32);
    opt.image_size = arg(argc, argv, 4, 64);
    opt.seed = 1;

    sl_loader_t *l = NULL;
    if (sl_loader_create(argv[1], &opt, &l) != 0) {
        fprintf(stderr, "stream: %s\n", sl_loader_last_error(NULL));
        return 1;
    }
    printf("sluice %s: %s, %lld samples, %d classes\n", sl_version_string(),
           argv[1], (long long)sl_loader_num_samples(l),
           sl_loader_num_classes(l));
    int rc = sl_loader_start(l, NULL);
    double t0 = now_s();
    long long samples = 0;
    int got = 0;
    while (rc == 0 && got < want) {
        const sl_batch_t *b;
        rc = sl_loader_next(l, &b);
        if (rc != 0)
            break;
        printf("batch %d: %d x %d x %d x %d %s\n", got, b->n, b->channels,
               b->height, b->width,
               b->dtype == SL_DTYPE_UINT8 ? "uint8" : "float32");
        samples += b->n;
        got++;
        sl_loader_release(l, b);
    }
    double dt = now_s() - t0;
    if (rc != 0 && rc != SL_EEND) {
        fprintf(stderr, "stream: %s (%s)\n", sl_loader_last_error(l),
                sl_strerror(rc));
        sl_loader_destroy(l);
        return 1;
    }
    printf("%d batches, %lld samples in %.3f s: %.0f samples/s\n", got, samples,
           dt, dt > 0 ? (double)samples / dt : 0.0);
    sl_loader_destroy(l);
    return 0;
}
