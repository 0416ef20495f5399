/* sluice calibrate: fits a simulator profile to the telemetry of one real
 * run (`sluice run --telemetry FILE`) and writes it. The fit is a library
 * module (src/analysis/calibrate.h); this parses and prints. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/calibrate.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice calibrate TELEMETRY.jsonl -o PROFILE.json "
               "[options]\n"
               "  -o, --output FILE    the profile to write\n"
               "  --step-ms T          the consumer step the run used (else "
               "inferred)\n"
               "  --consumer-cpu C     0..1: the consumer's CPU demand (0: it "
               "sleeps)\n"
               "  --batch-bytes B      bytes of one batch buffer (batch x "
               "224x224x3)\n"
               "  --storage-bw B       storage bytes/s (0: page cache)\n"
               "  --storage-latency-ms L  per-read latency (0)\n"
               "  --skip S             warm-up seconds left out (1)\n"
               "  --json               print the fit as one JSON object\n");
}

int sl__cmd_calibrate(int argc, char **argv)
{
    enum { O_STEP = 256, O_CCPU, O_BB, O_BW, O_LAT, O_SKIP, O_JSON };
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"step-ms", 1, 0, O_STEP},
                                       {"consumer-cpu", 1, 0, O_CCPU},
                                       {"batch-bytes", 1, 0, O_BB},
                                       {"storage-bw", 1, 0, O_BW},
                                       {"storage-latency-ms", 1, 0, O_LAT},
                                       {"skip", 1, 0, O_SKIP},
                                       {"json", 0, 0, O_JSON},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL;
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    int json = 0, c, li = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", lo, &li)) != -1) {
        char *end = (char *)"";
        double v = 0;
        if (c != 'h' && c != 'o' && c != O_JSON && c != '?')
            v = strtod(optarg, &end);
        if (*end || v < 0) {
            fprintf(stderr, "sluice calibrate: bad value '%s' for --%s\n",
                    optarg, li >= 0 ? lo[li].name : "?");
            return 2;
        }
        /* To the library 0 means "the default" and < 0 "none" (0 ms). */
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'o':
            out = optarg;
            break;
        case O_STEP:
            o.step_ms = v > 0 ? v : -1;
            break;
        case O_CCPU:
            o.consumer_cpu = v;
            break;
        case O_BB:
            o.batch_bytes = v;
            break;
        case O_BW:
            o.storage_bw = v;
            break;
        case O_LAT:
            o.storage_latency_ms = v;
            break;
        case O_SKIP:
            o.skip_s = v > 0 ? v : -1;
            break;
        case O_JSON:
            json = 1;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    char err[1024];
    sl_calibrate_options_t resolved;
    if (sl__calibrate_options_resolve(&o, &resolved, err, sizeof err)) {
        fprintf(stderr, "sluice calibrate: %s\n", err);
        return 2;
    }
    if (!out || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    sl__calibration_t *cal = calloc(1, sizeof *cal);
    int rc = cal ? sl__calibrate_file(argv[optind], &o, cal, err, sizeof err)
                 : SL_ENOMEM;
    if (!rc)
        rc = sl__sim_profile_save_note(out, &cal->profile, cal->note, err,
                                       sizeof err);
    if (rc) {
        fprintf(stderr, "sluice calibrate: %s\n", cal ? err : "out of memory");
        free(cal);
        return 1;
    }
    const sl__sim_profile_t *p = &cal->profile;
    char *text = json ? sl__calibration_fit_json(cal) : NULL;
    if (json)
        printf("%s\n", text ? text : "{}");
    else
        printf("%s: decode %.3f ms (cv %.2f), read %.3f ms (cv %.2f), "
               "%.0f B/item, step %.2f ms, batch %d, %d cores; core share "
               "%.2f, foreign load %.2f cores (%d periods used)\n",
               out, p->decode_ms, p->decode_cv, p->read_ms, p->read_cv,
               p->item_bytes, p->step_ms, p->batch_size, p->ncpu,
               cal->fit.core_share, cal->foreign_cores, cal->fit.used);
    free(text);
    free(cal);
    return 0;
}
