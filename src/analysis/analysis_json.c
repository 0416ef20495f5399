/* The analysis as one JSON object: the keys and number formats of `sluice
 * analyze --json`, which scripts and tests read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis.h"

char *sl__analysis_json(const sl__analysis_t *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const sl_analyze_options_t *o = &a->opt;
    const sl__analysis_level_t *lv = &a->level[a->main_level];
    int n = o->decode_threads;
    fprintf(f,
            "{\"bound\": \"%s\", \"predicted_stall\": %.4f, "
            "\"measured_stall\": %.4f, \"demand_rate\": %.2f, "
            "\"prep_rate\": %.2f, \"fetch_rate_cold\": %.2f, "
            "\"fetch_rate_warm\": %.2f, \"fetch_mb_s_cold\": %.2f, "
            "\"fetch_mb_s_warm\": %.2f, \"supply_rate\": %.2f, "
            "\"prep_rate_by_threads\": [",
            sl__bound_name(a->model.bound), lv->predicted, lv->measured,
            a->demand, a->prep[n - 1], sl__fetch_rate(&a->cold),
            sl__fetch_rate(&a->warm), sl__fetch_bytes_per_s(&a->cold) / 1e6,
            sl__fetch_bytes_per_s(&a->warm) / 1e6, a->model.supply);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.2f", i ? ", " : "", a->prep[i]);
    fprintf(f,
            "], \"prep_cores_used\": %.2f, \"prep_rate_after\": %.2f, "
            "\"threads\": %d, \"cores\": %d, \"threads_needed\": %" PRId64
            ", \"threads_needed_exceeds_cores\": %s, "
            "\"cache_bytes_needed\": %.0f, "
            "\"bandwidth_needed_bytes_per_s\": %.0f, "
            "\"dataset_bytes\": %.0f, \"dataset_fits_in_memory\": %s, "
            "\"mem_available_bytes\": %.0f, \"samples\": %" PRId64
            ", \"batch\": %d, \"size\": %d, \"prefetch\": %d, "
            "\"step_ms\": %.3f, \"delivered_rate\": %.2f",
            a->prep_cores[n - 1], a->prep_after, n, a->cores, a->threads_needed,
            a->threads_needed > a->cores ? "true" : "false",
            a->cache_bytes_needed, a->bandwidth_needed, a->files.bytes,
            a->fits ? "true" : "false", a->mem_available, a->samples,
            o->batch_size, o->image_size, o->prefetch, lv->step_ms,
            lv->delivered);
    if (o->sweep) {
        fprintf(f, ", \"sweep\": [");
        for (int i = 0; i < a->nlevels; i++)
            fprintf(f,
                    "%s{\"demand_rate\": %.2f, \"predicted_stall\": %.4f, "
                    "\"measured_stall\": %.4f, \"delivered_rate\": %.2f, "
                    "\"cores_used\": %.2f, \"hold_over_ms\": %.3f}",
                    i ? ", " : "", a->level[i].demand, a->level[i].predicted,
                    a->level[i].measured, a->level[i].delivered,
                    a->level[i].cores_used, a->level[i].hold_over_ms);
        fprintf(f, "]");
    }
    fprintf(f, "}");
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}
