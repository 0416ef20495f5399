/* How long one RL scheduling decision takes (target <= 20 us): features
 * from a 5-snapshot window, standardisation, the MLP forward pass, masks,
 * argmax and the reason string, as sl__rl_sched_step does at deployment;
 * and the forward pass alone. Usage: policy_speed [POLICY_FILE] [N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "sched/limits.h"
#include "sched/rl.h"

/* CPU time of this thread: on a loaded machine wall time would count the
 * time other processes held the core. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    sl__rl_policy_t pol;
    char err[512];
    int rc = argc > 1 && strcmp(argv[1], "-")
                 ? sl__rl_policy_load(argv[1], &pol, err, sizeof err)
                 : sl__rl_policy_default(&pol, err, sizeof err);
    if (rc == SL_ENOTFOUND && argc < 2)
        rc = sl__rl_policy_init(&pol, 64, 0, 1);
    if (rc) {
        fprintf(stderr, "policy_speed: %s\n", err);
        return 1;
    }
    int n = argc > 2 ? atoi(argv[2]) : 200000;
    sl_snapshot_t win[5];
    memset(win, 0, sizeof win);
    for (int i = 0; i < 5; i++) {
        win[i].ncpu = 2;
        win[i].cpu_self = 0.5 + 0.01 * i;
        win[i].stall_fraction = 0.1;
        win[i].consumer_wait_ms = 3;
        win[i].samples_per_s = 800 + i;
        win[i].decode.busy = 0.9;
        win[i].decode.items_per_s = 800;
        win[i].read.items_per_s = 800;
        win[i].read.queue_capacity = win[i].decode.queue_capacity = 32;
        win[i].prefetch = 4;
        win[i].mem_total_bytes = 8LL << 30;
        win[i].mem_available_bytes = 4LL << 30;
    }
    sl__limits_t lim = sl__limits_plain(4, 8, 16);
    sl__knobs_t cur = {1, 2, 4, 0}, next;
    sl__rl_sched_t s;
    if (sl__rl_sched_init(&s, &pol, 0, 1))
        return 1;
    char why[160];
    volatile int sink = 0;
    for (int i = 0; i < 1000; i++) /* warm up */
        sink += sl__rl_sched_step(&s, win, 5, &lim, &cur, &next, why, 160);
    int64_t t0 = sl__now_ns(), c0 = cpu_ns();
    for (int i = 0; i < n; i++) {
        win[4].samples_per_s = 800 + (i & 7); /* no loop-invariant result */
        sink += sl__rl_sched_step(&s, win, 5, &lim, &cur, &next, why, 160);
    }
    int64_t t1 = sl__now_ns(), c1 = cpu_ns();
    double x[SL_RL_NOBS] = {0}, z[SL_MLP_MAX_LOGITS], v;
    for (int i = 0; i < n; i++) {
        x[0] = i & 7;
        sl__mlp_forward(&s.pol.net, x, NULL, z, &v);
        sink += z[0] > 0;
    }
    int64_t t2 = sl__now_ns(), c2 = cpu_ns();
    printf("policy: %d inputs, %d hidden, %zu parameters\n", s.pol.net.n_in,
           s.pol.net.n_hid, s.pol.net.n_params);
    printf("decision (features + forward + mask + argmax + reason): %.2f us "
           "CPU, %.2f us wall\n",
           (c1 - c0) / 1e3 / n, (t1 - t0) / 1e3 / n);
    printf("forward pass alone: %.2f us CPU, %.2f us wall\n",
           (c2 - c1) / 1e3 / n, (t2 - t1) / 1e3 / n);
    printf("last reason: %s\n", why);
    sl__rl_sched_free(&s);
    return sink < 0;
}
