/* sluice run | bench: stream batches as a trainer would and report the
 * figures (throughput, stalls, waits, CPU, memory), optionally a digest of
 * every byte handed out, and a resumable position. The command line is
 * run_args.c; the consumer loop, consume.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "run_args.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"

#define STATE_MAGIC "sluice-state 1"

static void progress(sl__consume_t *c, int64_t now)
{
    sl_loader_t *l = ((sl__run_args_t *)c->ctx)->loader;
    sl_snapshot_t snap;
    sl_snapshot_init(&snap);
    int have = sl_loader_snapshot(l, &snap) == 0 && snap.t > 0;
    double secs = (double)(now - c->t0) / 1e9;
    double stall = secs > 0 ? (double)c->waits.total / 1e9 / secs : 0;
    int64_t done = c->done, total = c->total;
    double eta = done > 0 ? secs * (double)(total - done) / (double)done : 0;
    int width = 30, fill = total ? (int)(width * done / total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %" PRId64 "/%" PRId64 " %6.0f img/s  stall %4.1f%%",
            bar, done, total, secs > 0 ? (double)c->samples / secs : 0.0,
            100.0 * stall);
    if (have)
        fprintf(stderr, "  cpu %3.0f%% (other %2.0f%%)  rss %4.0f MB",
                100.0 * snap.cpu_self, 100.0 * snap.cpu_other,
                (double)snap.rss_bytes / 1048576.0);
    fprintf(stderr, "  eta %02d:%02d ", (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
}

/* --set: the knob changes due before the next batch. */
static void apply_sets(sl__consume_t *c, double elapsed)
{
    sl__run_args_t *a = c->ctx;
    sl__knob_sets_due(&a->sets, a->loader, c->cmd, c->done, elapsed,
                      &c->step_ms);
}

int sl__cmd_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* text batches: cmd_text.c */
        if (!strcmp(argv[i], "--task") || !strncmp(argv[i], "--task=", 7))
            return sl__cmd_text(argc, argv);
    sl__run_args_t a = {0};
    sl_options_init(&a.opt);
    sl__consume_t c = {
        .args = &a.c, .magic = STATE_MAGIC, .progress = progress, .ctx = &a};
    int rc = sl__consume_begin(&c, &sl__run_cli, argc, argv, &a.opt.epochs);
    if (rc)
        return rc < 0 ? 0 : rc;
    c.step_ms = a.step_ms;
    c.before = a.sets.n ? apply_sets : NULL;
    if (sl_loader_create(a.source, &a.opt, &a.loader)) {
        fprintf(stderr, "sluice %s: %s\n", argv[0], sl_loader_last_error(NULL));
        return 1;
    }
    sl_loader_t *l = a.loader;
    for (int k = 1; k <= 2; k++) /* emulated storage (sluice/testing.h) */
        if (a.storage[k])
            sl__testing_storage_set(l, (sl_testing_storage_t)k, a.storage[k]);
    int64_t nb = sl_loader_batches_per_epoch(l);
    c.total = nb * a.opt.epochs - c.from.batch;
    if (!a.c.json || c.show)
        fprintf(stderr,
                "sluice %s: %" PRId64 " samples, %d classes, %" PRId64
                " batches/epoch, from epoch %" PRId64 " batch %" PRId64 "\n",
                argv[0], sl_loader_num_samples(l), sl_loader_num_classes(l), nb,
                c.from.epoch, c.from.batch);
    const sl__stream_t s = sl__stream_image(l);
    rc = sl__consume_run(&c, &s);
    sl_options_t used; /* the options in force, defaults resolved */
    sl_options_init(&used);
    sl_loader_options(l, &used);
    sl__report_t r = {
        .noun = "samples",
        .unit = "img/s",
        .threads = used.decode_threads,
        .batch = used.batch_size,
        .out = used.dtype == SL_DTYPE_FLOAT32 ? "float" : "uint8",
    };
    snprintf(r.json_shape, sizeof r.json_shape, ", \"size\": %d",
             used.image_size);
    sl__consume_report(&c, &r);
    sl_loader_destroy(l);
    return rc ? 1 : 0;
}
