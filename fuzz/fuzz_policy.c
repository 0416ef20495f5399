/* Fuzz target: any bytes through the policy weights loader
 * (sched/rl_file.c), twice: as given, then with the trailing checksum made
 * to match (mutations almost never keep it right, and without this the
 * fuzzer would not get past it to the header and value checks). A policy
 * that parses is used for one decision, which must stay within the limits,
 * and then for one scheduler tick through the policy interface
 * (sched/policy.h), whose changes must each pass the budget check.
 * Nothing may crash, leak or read out of bounds. The seed corpus is
 * written by `SL_GEN_CORPUS=DIR tests/unit/test_rl`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/base.h"
#include "sched/limits.h"
#include "sched/policy.h"
#include "sched/rl.h"

static void parse_and_use(const uint8_t *data, size_t size)
{
    sl__rl_policy_t p;
    char err[512];
    if (sl__rl_policy_parse(data, size, &p, err, sizeof err))
        return;
    double raw[SL_RL_NOBS];
    for (int i = 0; i < SL_RL_NOBS; i++)
        raw[i] = 0.5;
    sl__limits_t lim = sl__limits_plain(4, 2, 8);
    sl__knobs_t cur = {1, 3, 8, 0}, next;
    lim.max_gpu_share = 1000; /* a GPU stage: a policy's share head steps */
    lim.tune_gpu_share = 1;
    cur.gpu_share = 950;
    sl__rl_decision_t d;
    sl__rl_decide(&p, raw, &lim, &cur, 0, NULL, &d, &next);
    /* The budgets: CPU threads = decode + 1 (the read stage), read threads
     * are I/O depth with their own cap (docs/POLICY.md). */
    if (next.decode_threads + 1 > lim.max_threads ||
        next.decode_threads > lim.max_decode ||
        next.read_threads > lim.max_read || next.prefetch > lim.max_prefetch ||
        next.read_threads < 1 || next.decode_threads < 1 || next.prefetch < 1 ||
        next.gpu_share < 0 || next.gpu_share > lim.max_gpu_share)
        abort();
    /* Round trip: the bytes it would write parse to the same weights. */
    size_t n = sl__rl_policy_serialize(&p, NULL, 0);
    uint8_t *b = malloc(n);
    if (b) {
        sl__rl_policy_serialize(&p, b, n);
        if (n != size || memcmp(b, data, n))
            abort();
        free(b);
    }
    /* The same policy behind the interface, one tick over a window. */
    sl__rl_policy_t copy;
    if (!sl__rl_policy_clone(&copy, &p)) {
        sl__sched_t s;
        sl__sched_init(&s, sl__policy_rl(&copy, 0, 1));
        if (s.pol) {
            sl_snapshot_t win[SL_SCHED_PERIODS];
            memset(win, 0, sizeof win);
            for (int i = 0; i < SL_SCHED_PERIODS; i++) {
                win[i].interval_s = 0.1;
                win[i].stall_fraction = 0.3;
                win[i].decode.busy = 0.9;
            }
            sl__sched_decision_t d;
            sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &cur, &d);
            for (int i = 0; i < d.n; i++)
                if (sl__limits_check(&lim, d.ch[i].knob, d.ch[i].to) ||
                    d.ch[i].from != sl__knob_get(&cur, d.ch[i].knob))
                    abort();
        }
        sl__sched_free(&s);
    }
    sl__rl_policy_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_and_use(data, size);
    if (size < 8)
        return 0;
    /* Exactly sized copy, so ASan sees any read past the end. */
    uint8_t *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    sl__put_u64(copy + size - 8, XXH3_64bits(copy, size - 8));
    parse_and_use(copy, size);
    free(copy);
    return 0;
}
