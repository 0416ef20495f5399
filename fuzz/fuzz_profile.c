/* Fuzz target: any bytes through the simulator's profile JSON loader
 * (sl__sim_profile_parse, what `sluice simulate --profile` reads). Nothing
 * may crash or leak; a profile it accepts must be in range (so the
 * simulator can run it: a short run follows; read_ahead 0 is the engine's
 * rule) and unchanged on failure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl__sim_profile_t p;
    memset(&p, 0x5a, sizeof p);
    sl__sim_profile_t before = p;
    char err[256];
    if (sl__sim_profile_parse((const char *)data, size, &p, err, sizeof err)) {
        if (memcmp(&p, &before, sizeof p) != 0 || !err[0])
            abort();
        return 0;
    }
    if (p.ncpu < 1 || p.ncpu > SL_SNAPSHOT_MAX_CORES || p.batch_size < 1 ||
        p.read_ahead < 0 || !(p.decode_ms > 0) || !(p.read_ms >= 0) ||
        !(p.consumer_cpu >= 0 && p.consumer_cpu <= 1) || p.n_events < 0 ||
        p.n_events > SL_SIM_MAX_EVENTS)
        abort();
    for (int i = 1; i < p.n_events; i++)
        if (p.events[i - 1].t > p.events[i].t)
            abort();
    /* A short run: every accepted profile must simulate. Bound the work
     * (items per period ~ ncpu x dt / decode_ms). */
    if (p.decode_ms < 0.1 || p.batch_size > 4096 || p.read_ahead > 1024)
        return 0;
    sl__knobs_t k = {2, 2, 2, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 1);
    if (!s)
        return 0;
    sl_snapshot_t sn;
    for (int i = 0; i < 3; i++) {
        sl__sim_step(s, 0.01, &sn);
        if (!(sn.stall_fraction >= 0 && sn.stall_fraction <= 1) ||
            !(sn.cpu_total >= 0 && sn.cpu_total <= 1) || sn.samples_total < 0)
            abort();
    }
    sl__sim_destroy(s);
    return 0;
}
