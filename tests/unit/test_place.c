/* The GPU share's rule (sched/place.h) as a pure function of telemetry
 * windows: it raises the share only when the trainer waits and the CPU
 * cannot give more, to what the model asks and never past the balance
 * with the GPU's measured capacity; it undoes a raise that did not pay
 * (a slowed training step included), sheds the share when calm, undoes a
 * shed that brings waits; the tick runs it first; the estimate asks
 * decoders for the CPU's part only. */
#include <string.h>

#include "sched/estimate.h"
#include "sched/place.h"
#include "sched/policy.h"
#include "testutil.h"

#define N 5
static sl_snapshot_t w[N];

/* A window of N periods of 0.1 s: the trainer got `rate` samples/s and
 * waited `stall` of the time; `dec` decoders (busy `dbusy`) made `cpu`
 * samples/s; the GPU stage at `share` made `gpu` samples/s, busy `gbusy`
 * of the time (< 0: no stage). 8 cores, none taken by others. */
static void window(double rate, double stall, int dec, double dbusy, double cpu,
                   int share, double gpu, double gbusy)
{
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        w[i].interval_s = 0.1;
        w[i].ncpu = 8;
        w[i].samples_per_s = rate;
        w[i].stall_fraction = stall;
        w[i].decode.workers = dec;
        w[i].decode.busy = dbusy;
        w[i].decode.items_per_s = cpu;
        w[i].placement_present = 1;
        w[i].placement_gpu = gbusy >= 0;
        w[i].gpu_share = share;
        w[i].gpu_samples_per_s = gpu;
        w[i].gpu_stage_busy = gbusy;
    }
}

/* The scheduler places; decoders capped at `max_dec` (a thread budget). */
static sl__limits_t limits(int max_dec)
{
    sl__limits_t l;
    memset(&l, 0, sizeof l);
    l.tune_decode = l.tune_read = l.tune_prefetch = 1;
    l.max_threads = max_dec + 1;
    l.max_decode = max_dec;
    l.max_read = 16;
    l.max_prefetch = 8;
    l.max_gpu_share = 1000;
    l.tune_gpu_share = 1;
    return l;
}

static void test_cpu_short_and_waiting_raises_the_share(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 0};
    char why[SL_SCHED_REASON];
    int share;
    /* One decoder, busy, 300/s; the trainer waits half the time: it
     * would take 600/s. The GPU is not measured yet: at most half. */
    window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 500);
    assert_non_null(strstr(why, "CPU short"));
    assert_non_null(strstr(why, "gpu_share 0 -> 500"));

    /* It paid (300 -> 550/s), and the GPU made 275/s busy half the time:
     * 550/s of capacity. Still waiting: the share rises toward what the
     * demand asks, never past the balance 550 / (550 + 275) = 0.667. */
    cur.gpu_share = share;
    window(550, 0.1, 1, 1.0, 275, 500, 275, 0.5);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
        0); /* the verdict: kept */
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_true(share >= 550 && share <= 667);
    assert_non_null(strstr(why, "GPU 550/s"));
    assert_int_equal(p.raises, 2);
}

static void test_a_raise_that_slows_the_trainer_is_undone(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 0};
    char why[SL_SCHED_REASON];
    int share;
    window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    cur.gpu_share = share;
    /* The GPU work slowed the training step: the trainer got less and
     * spent longer per sample outside next(). Undone, with the step's
     * slowdown named. */
    window(280, 0.4, 1, 1.0, 140, share, 140, 0.3);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 0);
    assert_non_null(strstr(why, "did not pay"));
    assert_non_null(strstr(why, "step +"));
    assert_true(p.interference > 0.1);
    /* Held: the next raise waits (2 windows), though the trainer waits. */
    cur.gpu_share = 0;
    window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(p.undone, 1);
}

static void test_cpu_with_room_is_the_decoders_job(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(7); /* 8 cores free, budget 7 decoders */
    sl__knobs_t cur = {1, 2, 4, 0};
    char why[SL_SCHED_REASON];
    int share;
    window(600, 0.5, 2, 1.0, 600, 0, 0, 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
    assert_int_equal(share, 0);
    /* Others take 7 of the 8 cores: now the CPU is short. */
    for (int i = 0; i < N; i++)
        w[i].cpu_other = 7.0 / 8;
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_true(share > 0);
}

static void test_calm_sheds_and_a_shed_that_brings_waits_is_undone(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(4);
    sl__knobs_t cur = {1, 2, 4, 600};
    char why[SL_SCHED_REASON];
    int share;
    /* The trainer takes 400/s and never waits; two decoders make their
     * 160/s at 40 % busy (5 ms each): four could make 800/s. */
    window(400, 0, 2, 0.4, 160, 600, 240, 0.3);
    for (int i = 0; i < SL_PLACE_CALM - 1; i++)
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 300); /* at most halved */
    assert_non_null(strstr(why, "calm"));
    cur.gpu_share = share;
    /* Waits came back: undone. */
    window(350, 0.2, 2, 1.0, 245, 300, 105, 0.2);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 600);
    assert_non_null(strstr(why, "shed brought waits"));
}

/* A share under two steps: halving it would move less than a step, so a
 * calm shed takes a step (69 -> 19), and one under a step goes whole
 * (19 -> 0): none stays on the GPU for good. Four decoders at half their
 * time make 372/s; all busy they could make 744/s, the CPU all of it. */
static void test_a_small_share_is_shed_to_none(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(4);
    sl__knobs_t cur = {1, 4, 4, 69};
    char why[SL_SCHED_REASON];
    int share = -1;
    const int to[2] = {19, 0};
    for (int k = 0; k < 2; k++) {
        window(400, 0, 4, 0.5, 372, cur.gpu_share, 28, 0.02);
        int r = 0;
        for (int i = 0; i < 2 * SL_PLACE_CALM && !r; i++)
            r = sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
        assert_int_equal(r, 1);
        assert_int_equal(share, to[k]);
        cur.gpu_share = share;
    }
    assert_int_equal(p.sheds, 2);
}

/* Calm windows at share s of batches of 8 whose four decoders, busy
 * `dbusy`, make 372/s for a trainer taking 400/s: the share the rule's
 * first decision sheds to, s where it sheds none. */
static int shed_of_eight(int s, double dbusy)
{
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(4);
    sl__knobs_t cur = {1, 4, 4, s};
    char why[SL_SCHED_REASON];
    int share = s, r = 0;
    window(400, 0, 4, dbusy, 372, s, 28, 0.02);
    for (int i = 0; i < N; i++) {
        w[i].samples_total = 8000;
        w[i].batches_total = 1000;
    }
    for (int i = 0; i < 2 * SL_PLACE_CALM && !r; i++)
        r = sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
    assert_int_equal(r, share != s);
    return share;
}

/* The loader routes whole slots: a shed moves at least one. At 130 one
 * of 8 slots is the GPU's, and so it is at 80 (a step less) and at 65
 * (halved): the shed goes on to 62, the share that routes none, where the
 * CPU carries it (four decoders could make 744/s at half their time) —
 * not where it carries no more than 70 per mille short of the demand
 * (busy 0.8: they could make 465/s, 80 % of it 372 of 400/s), nor below
 * 62 (routes no slot: goes whole). */
static void test_a_shed_moves_a_slot(void **state)
{
    (void)state;
    assert_int_equal(shed_of_eight(130, 0.5), 62);
    assert_int_equal(shed_of_eight(62, 0.5), 0);
    assert_int_equal(shed_of_eight(130, 0.8), 130);
    assert_int_equal(shed_of_eight(62, 0.8), 0);
    /* two slots at 200; 100, halved, routes one: no further */
    assert_int_equal(shed_of_eight(200, 0.5), 100);
}

/* A fresh rule on a window where the trainer waits 30 % and the CPU is
 * short (a raise is due), with NVML reporting the GPU's use `util` and its
 * JPEG decoders' `jpg` in each period (present 0: no NVML): 1 when it
 * raises the share; else 0, and why is in `held`. */
static char held[96];
static int raises_with(int present, const double util[N], const double jpg[N])
{
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 300};
    char why[SL_SCHED_REASON];
    int share;
    window(600, 0.3, 1, 1.0, 420, 300, 180, 0.3);
    for (int i = 0; i < N; i++) {
        w[i].gpu_present = present;
        w[i].gpu_util = util[i];
        w[i].gpu_jpg_util = jpg[i];
    }
    int r = sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
    assert_true(r ? share > 300 : share == 300);
    assert_true(r ? p.held[0] == 0 : p.held[0] != 0);
    memcpy(held, p.held, sizeof held);
    return r;
}

static void test_no_raise_when_nvml_says_the_gpu_is_full(void **state)
{
    (void)state;
    const double low[N] = {0.2, 0.2, 0.2, 0.2, 0.2};
    const double full[N] = {0.97, 0.97, 0.97, 0.97, 0.97};
    const double one[N] = {0.62, 0.62, 0.62, 0.62, 0.97}; /* mean 0.69 */
    assert_int_equal(raises_with(1, low, low), 1);
    /* the JPEG decoders full: the engines are the bound */
    assert_int_equal(raises_with(1, low, full), 0);
    assert_string_equal(held, "NVML: the JPEG decoders busy 97 % of the time");
    /* kernels running all the window: the trainer's wait is not the
     * GPU's idle time */
    assert_int_equal(raises_with(1, full, low), 0);
    assert_string_equal(held, "NVML: the GPU ran kernels 97 % of the time");
    /* the window's mean decides, not one reading */
    assert_int_equal(raises_with(1, one, low), 1);
    assert_int_equal(raises_with(1, low, one), 1);
    /* without NVML its fields are not read */
    assert_int_equal(raises_with(0, full, full), 1);
}

static void test_nothing_without_the_scheduler_placing(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(1);
    lim.tune_gpu_share = 0; /* static, a share given, or no stage */
    sl__knobs_t cur = {1, 1, 4, 0};
    char why[SL_SCHED_REASON];
    int share = -1;
    window(300, 0.9, 1, 1.0, 300, 0, 0, -1);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
    assert_int_equal(share, 0);
}

static void test_the_tick_places_first_and_alone(void **state)
{
    (void)state;
    sl__sched_t s;
    sl__sched_init(&s, sl__policy_heuristic());
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 0};
    sl__sched_decision_t d;
    window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
    assert_int_equal(sl__sched_tick(&s, w, N, &lim, &cur, &d), 1);
    assert_int_equal(d.ch[0].knob, SL_KNOB_GPU_SHARE);
    assert_int_equal(d.ch[0].from, 0);
    assert_int_equal(d.ch[0].to, 500);
    assert_non_null(strstr(d.reason, "placement"));
    sl__sched_free(&s);
}

static void test_the_estimate_asks_decoders_for_the_cpus_part(void **state)
{
    (void)state;
    sl__limits_t lim = limits(16);
    sl__knobs_t cur = {1, 2, 4, 0};
    sl__estimate_t a, b;
    /* 2 decoders at 10 ms a sample, the trainer wants 800/s. */
    window(200, 0.75, 2, 1.0, 200, 0, 0, -1);
    sl__estimate(w, N, &lim, &cur, &a);
    /* Half of each batch on the GPU: the same decoders make the other
     * half, the trainer gets 400/s and still wants 800/s. */
    cur.gpu_share = 500;
    window(400, 0.5, 2, 1.0, 200, 500, 200, 0.2);
    sl__estimate(w, N, &lim, &cur, &b);
    assert_true(a.cpu_frac == 1.0);
    assert_true(b.cpu_frac > 0.49 && b.cpu_frac < 0.51);
    assert_int_equal(a.need_decode, 10);
    assert_int_equal(b.need_decode, 5);
    /* The whole batch's rate: the CPU's 200/s is half of it, and the GPU
     * (1000/s busy) is not the bound. */
    assert_true(b.cpu_prep > 199 && b.cpu_prep < 201);
    assert_true(b.prep > 399 && b.prep < 401);
    assert_true(b.gpu_rate > 999 && b.gpu_rate < 1001);
}

/* The CPU a GPU sample costs (gpu_cpu_busy over the stage's samples) is
 * counted: 1 ms against a 10 ms decode is k = 0.1, so at share 500 the
 * same decoders make 200 / (0.5 + 0.5 x 0.1) batch samples/s, and they
 * are asked for the hand-overs too. */
static void test_the_estimate_counts_the_hand_over(void **state)
{
    (void)state;
    sl__limits_t lim = limits(16);
    sl__knobs_t cur = {1, 2, 4, 500};
    sl__estimate_t a, b;
    window(400, 0.5, 2, 1.0, 200, 500, 200, 0.2);
    for (int i = 0; i < N; i++)
        w[i].gpu_cpu_busy = -1; /* a snapshot without it */
    sl__estimate(w, N, &lim, &cur, &a);
    for (int i = 0; i < N; i++)
        w[i].gpu_cpu_busy = 0.2; /* 200/s at 1 ms */
    sl__estimate(w, N, &lim, &cur, &b);
    assert_true(a.gpu_cpu_k == 0);
    assert_int_equal(a.need_decode, 5); /* 800 x 0.5 x 10 ms x 1.15 */
    assert_true(b.gpu_cpu_k > 0.099 && b.gpu_cpu_k < 0.101);
    assert_true(b.prep > 363 && b.prep < 364);
    assert_int_equal(b.need_decode, 6); /* 800 x 0.55 x 10 ms x 1.15 */
    /* A GPU path that costs more than a decode is taken at the most. */
    for (int i = 0; i < N; i++)
        w[i].gpu_cpu_busy = 4;
    sl__estimate(w, N, &lim, &cur, &b);
    assert_true(b.gpu_cpu_k == SL_EST_GPU_CPU_K_MAX);
    /* A quarter of the 1 ms in the decoders' hand-overs, the rest the
     * stage's threads: with spare cores (3 threads want the 8) only the
     * hand-overs cost the decoders; with 12 wanting them, all of it. */
    for (int rq = 3; rq <= 12; rq += 9) {
        for (int i = 0; i < N; i++) {
            w[i].gpu_cpu_busy = 0.2;
            w[i].gpu_handoff_busy = 0.05;
            w[i].run_queue = rq;
        }
        sl__estimate(w, N, &lim, &cur, &b);
        double k = rq > 8 ? 0.1 : 0.025;
        assert_true(b.gpu_cpu_k > 0.99 * k && b.gpu_cpu_k < 1.01 * k);
    }
}

/* A window of the loader alone (the trainer takes all it gets) with
 * `dec` decoders at 2.2 ms a decode making `cpu`/s at share `share`, the
 * stage 14,000/s of capacity making `gpu`/s, each of its samples 0.15 ms
 * of CPU. */
static void alone(int dec, double cpu, int share, double gpu)
{
    window(cpu + gpu, 0.99, dec, cpu * 0.0022 / dec, cpu, share, gpu,
           gpu / 14000);
    for (int i = 0; i < N; i++)
        w[i].gpu_cpu_busy = gpu * 0.00015;
}

/* With 2 decoders the hand-overs alone take the cores: the balance that
 * counts them is the whole batch on the GPU (without them: 934). */
static void test_the_balance_counts_the_hand_over(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(2);
    sl__knobs_t cur = {1, 2, 4, 500};
    char why[SL_SCHED_REASON];
    int share;
    alone(2, 450, 500, 450);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 1000);
    assert_non_null(strstr(why, "gpu_share 500 -> 1000"));
}

/* Near the balance a raise of less than half a step is made where the
 * model says it buys 5 %, and goes no further than the balance. 16
 * decoders make 7,273 decodes/s, k = 0.068: the balance is 689; from
 * 665, 24 per mille short, it is +6 %. From 675 (+3 %) the share stays,
 * saying why. */
static void test_a_small_raise_near_the_balance(void **state)
{
    (void)state;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(16);
    sl__knobs_t cur = {1, 16, 4, 665};
    char why[SL_SCHED_REASON];
    int share;
    alone(16, 6000, 665, 12000);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_true(share >= 689 && share <= 690);
    assert_non_null(strstr(why, "gpu_share 665 -> 6"));

    sl__place_init(&p);
    cur.gpu_share = 675;
    alone(16, 6000, 675, 12000);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
    assert_int_equal(share, 675);
    assert_non_null(strstr(p.held, "the balance with the GPU's measured"));
}

/* The loader routes whole slots (gpu/placement.h): a raise moves at
 * least one of a batch's (its size from the window's totals), and one
 * that cannot without passing the balance for less than the gain is not
 * made. A window without decodes (cpu 0) makes no model raise. */
static void test_a_raise_moves_a_slot(void **state)
{
    (void)state;
    sl__place_t p;
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 0};
    char why[SL_SCHED_REASON];
    int share;
    /* Batches of 2: the demand asks 182 per mille, which routes no slot;
     * 250 routes one. */
    sl__place_init(&p);
    window(300, 0.06, 1, 1.0, 300, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        w[i].samples_total = 2000;
        w[i].batches_total = 1000;
    }
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 250);
    /* Batches of 16 near the balance (689): from 665 (11 slots) the next
     * slot is at 719, past it, for less than 5 %: held. Batches of 64:
     * 690 routes one more (44 of 64), raised. */
    lim = limits(16);
    cur = (sl__knobs_t){1, 16, 4, 665};
    for (int b = 16; b <= 64; b += 48) {
        sl__place_init(&p);
        alone(16, 6000, 665, 12000);
        for (int i = 0; i < N; i++) {
            w[i].samples_total = 1000 * b;
            w[i].batches_total = 1000;
        }
        int r = sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
        assert_int_equal(r, b == 64);
        assert_int_equal(share, b == 64 ? 690 : 665);
    }
    /* No decodes in the window: nothing to weigh a raise by. */
    sl__place_init(&p);
    cur.gpu_share = 980;
    alone(16, 0, 980, 12000);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
}

/* A GPU path that costs about what a decode does saves the CPU nothing:
 * the model sees no gain in a raise (held says why), where the same
 * window with cheap hand-overs raises. 2 decoders at 2.2 ms (909/s), a
 * slow stage (300/s) at share 147. */
static void test_no_raise_where_the_gpu_path_saves_no_cpu(void **state)
{
    (void)state;
    sl__limits_t lim = limits(2);
    sl__knobs_t cur = {1, 2, 4, 147};
    char why[SL_SCHED_REASON];
    int share;
    for (int cheap = 0; cheap <= 1; cheap++) {
        sl__place_t p;
        sl__place_init(&p);
        window(894, 0.99, 2, 850 * 0.0022 / 2, 850, 147, 44, 44.0 / 300);
        for (int i = 0; i < N; i++)
            w[i].gpu_cpu_busy = 44 * (cheap ? 0.00015 : 0.0021);
        int r = sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
        assert_int_equal(r, cheap);
        if (!cheap) {
            assert_int_equal(share, 147);
            assert_non_null(strstr(p.held, "of a decode's CPU"));
            /* What a GPU sample costs is kept, as the stage's capacity is,
             * through windows where the stage did nothing. */
            window(850, 0.99, 2, 850 * 0.0022 / 2, 850, 147, 0, 0);
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                0);
        }
    }
}

/* Sets every period's batch size (b samples, from the totals), batches
 * ready and runnable threads (0: leaves it). */
static void loader(int b, double ready, int runq)
{
    for (int i = 0; i < N; i++) {
        if (b > 0) {
            w[i].samples_total = 1000LL * b;
            w[i].batches_total = 1000;
        }
        w[i].batches_ready = ready;
        if (runq > 0)
            w[i].run_queue = runq;
        /* one reader, 1 ms a read: fetch 1,000/s, never the bound */
        w[i].read.workers = 1;
        w[i].read.busy = w[i].decode.items_per_s / 1000;
        w[i].read.items_per_s = w[i].decode.items_per_s;
    }
}

/* The trainer does not wait yet, but takes more than the CPU makes and
 * the buffer runs down (1 of 4 batches ready): the share rises before
 * the wait, and the raise is judged by what the paths make. */
static void test_a_draining_buffer_raises_before_the_wait(void **state)
{
    (void)state;
    sl__limits_t lim = limits(1);
    char why[SL_SCHED_REASON];
    int share;
    for (int pays = 0; pays < 3; pays++) {
        sl__place_t p;
        sl__place_init(&p);
        sl__knobs_t cur = {1, 1, 4, 0};
        /* Half the batches ready: not draining yet. */
        window(400, 0, 1, 1.0, 300, 0, 0, 0);
        loader(0, 2, 0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
        window(400, 0, 1, 1.0, 300, 0, 0, 0);
        loader(0, 1, 0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
        /* the demand with headroom, 460/s: the GPU takes 1 - 300 / 460 */
        assert_int_equal(share, 348);
        assert_non_null(strstr(why, "buffer drains (1.0 of 4 ready)"));
        cur.gpu_share = share;
        /* Made 400/s (+33 %): kept. Made 300/s: undone, saying so. Made
         * 380/s, but the buffer ran out (the trainer waits 10 %, gets
         * what is made: less than it took from the buffer, more than
         * was made before): kept, at once, batches of 10 counted. */
        if (pays == 2)
            window(380, 0.1, 1, 0.8, 240, share, 140, 0.1);
        else if (pays)
            window(400, 0, 1, 0.87, 260, share, 140, 0.1);
        else
            window(400, 0, 1, 0.67, 200, share, 100, 0.1);
        loader(pays == 2 ? 10 : 0, 1, 0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
            !pays);
        assert_int_equal(p.trial, 0); /* a verdict */
        assert_int_equal(p.undone, !pays);
        assert_int_equal(share, pays ? 348 : 0);
        if (!pays)
            assert_non_null(strstr(why, "made 300 -> 300/s"));
    }
}

/* A verdict sure beyond a batch's noise either way is given at once: a
 * raise after which the trainer clearly got less, a shed that brought
 * waits, or one after which the buffer drains (batches of 10: 15 a
 * window). */
static void test_a_clear_failure_is_undone_at_once(void **state)
{
    (void)state;
    char why[SL_SCHED_REASON];
    int share;
    sl__place_t p;
    sl__place_init(&p);
    sl__limits_t lim = limits(1);
    sl__knobs_t cur = {1, 1, 4, 0};
    window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
    loader(10, 0, 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    cur.gpu_share = share;
    window(200, 0.5, 1, 1.0, 100, share, 100, 0.2);
    loader(10, 0, 0);
    assert_int_equal(
        sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
    assert_int_equal(share, 0);
    assert_non_null(strstr(why, "did not pay"));
    /* Sheds: the trainer takes 400/s, never waiting (the shed test's
     * window, batches of 10). */
    lim = limits(4);
    for (int drains = 0; drains < 2; drains++) {
        sl__place_init(&p);
        cur = (sl__knobs_t){1, 2, 4, 600};
        window(400, 0, 2, 0.4, 160, 600, 240, 0.3);
        loader(10, 4, 0);
        for (int i = 0; i < SL_PLACE_CALM - 1; i++)
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
        assert_int_equal(share, 300);
        cur.gpu_share = share;
        /* It waits 60 % now; or not yet, but takes more than the CPU
         * makes with 1 of 4 batches ready. */
        if (drains)
            window(400, 0, 2, 1.0, 210, 300, 90, 0.1);
        else
            window(400, 0.6, 2, 1.0, 280, 300, 120, 0.1);
        loader(10, drains ? 1 : 0, 0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
        assert_int_equal(share, 600);
        assert_non_null(strstr(why, "shed brought waits"));
    }
}

/* The trainer takes whole batches: over a window of 15 batches of 10 its
 * rate is known within 20/s, before and after. A gain beyond that is
 * judged at once; one within it waits for 32 batches (3 windows here). */
static void test_a_verdict_waits_for_enough_batches(void **state)
{
    (void)state;
    sl__limits_t lim = limits(1);
    char why[SL_SCHED_REASON];
    int share;
    for (int sure = 0; sure < 2; sure++) {
        for (int pays = 0; pays < 2; pays++) {
            sl__place_t p;
            sl__place_init(&p);
            sl__knobs_t cur = {1, 1, 4, 0};
            window(300, 0.5, 1, 1.0, 300, 0, 0, 0);
            loader(10, 0, 0);
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                1);
            assert_int_equal(share, 500);
            cur.gpu_share = share;
            /* +83 %, or +6 % (the bar 5 %) or nothing, the stall barely
             * cut */
            double r = sure ? 550 : pays ? 318 : 300;
            window(r, 0.45, 1, 1.0, r / 2, 500, r / 2, 0.2);
            loader(10, 0, 0);
            int windows = sure ? 1 : 3;
            for (int i = 1; i < windows; i++) {
                assert_int_equal(sl__place_step(&p, w, N, &lim, &cur, &share,
                                                why, sizeof why),
                                 0);
                assert_int_equal(p.trial, 1); /* not sure yet */
            }
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                !(sure || pays));
            assert_int_equal(p.trial, 0);
            assert_int_equal(share, sure || pays ? 500 : 0);
        }
    }
}

/* 8 cores, 12 threads want them: the trainer does not wait, but its step
 * runs 11 % slower than its best — the decoders take its time. The
 * share rises to take 12 (1 - 1 / 1.11) of their 3.2 busy threads off
 * the cores; paid, no shed goes under it while the others' threads
 * would crowd them with the decoders back at the share before. A raise
 * that does not speed the trainer is undone, and its pace then is its
 * best from now on. A
 * trainer far slower than contention can explain (it paused) is not
 * starved. The trainer holds one of the 4 batch buffers: 3 ready is
 * full. */
static void test_a_starved_trainer_gets_cores_back(void **state)
{
    (void)state;
    sl__limits_t lim = limits(7);
    char why[SL_SCHED_REASON];
    int share;
    for (int pays = 0; pays < 2; pays++) {
        sl__place_t p;
        sl__place_init(&p);
        sl__knobs_t cur = {1, 4, 4, 200};
        /* Its best: 1,000/s, 6 threads on 8 cores, the buffer full. */
        window(1000, 0, 4, 0.5, 800, 200, 200, 0.1);
        loader(10, 3, 6);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 0);
        assert_true(p.best_work > 0.00099 && p.best_work < 0.00101);
        /* Paused (60/s): 16x slower, more than 12 / 8 threads explain. */
        sl__place_t paused = p;
        sl__knobs_t none = {1, 4, 4, 0}; /* no share to shed */
        for (int i = 0; i < SL_PLACE_JUDGE_WINDOWS; i++) {
            window(60, 0, 4, 0.1, 60, 0, 0, -1);
            loader(10, 3, 12);
            assert_int_equal(sl__place_step(&paused, w, N, &lim, &none, &share,
                                            why, sizeof why),
                             0);
        }
        window(900, 0, 4, 0.8, 720, 200, 180, 0.09);
        loader(10, 2, 12); /* 2 of the 3 buffers it does not hold: refilling */
        sl__place_t refill = p;
        assert_int_equal(
            sl__place_step(&refill, w, N, &lim, &cur, &share, why, sizeof why),
            0);
        loader(10, 3, 12);
        /* A GPU sample that costs about a decode's CPU: the most share
         * frees little of it, no trial. */
        sl__place_t dear = p;
        for (int i = 0; i < N; i++)
            w[i].gpu_cpu_busy = 1.0;
        assert_int_equal(
            sl__place_step(&dear, w, N, &lim, &cur, &share, why, sizeof why),
            0);
        for (int i = 0; i < N; i++)
            w[i].gpu_cpu_busy = 0;
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why), 1);
        assert_true(share >= 495 && share <= 505); /* half the batch */
        int raised = share;
        cur.gpu_share = share;
        assert_non_null(strstr(why, "the trainer's step +11 % over its best "
                                    "while 12 threads want 8 cores"));
        /* A sixth of the lost speed back (900 -> 925/s, within a batch's
         * noise: judged over the most windows) pays. */
        sl__place_t sixth = p;
        for (int i = 0; i < SL_PLACE_SETTLE + SL_PLACE_JUDGE_WINDOWS; i++) {
            window(925, 0, 4, 0.6, 462, raised, 463, 0.23);
            loader(10, 3, 12);
            assert_int_equal(sl__place_step(&sixth, w, N, &lim, &cur, &share,
                                            why, sizeof why),
                             0);
            assert_int_equal(sixth.trial,
                             i < SL_PLACE_SETTLE + SL_PLACE_JUDGE_WINDOWS - 1);
        }
        assert_int_equal(sixth.undone, 0);
        /* The windows as the cores free up are not counted; then the
         * trainer back at 1,000/s: paid at once (beyond a batch's noise).
         * Still at 900/s: judged over the most windows. */
        int windows = SL_PLACE_SETTLE + (pays ? 1 : SL_PLACE_JUDGE_WINDOWS);
        for (int i = 0; i < windows; i++) {
            if (i < SL_PLACE_SETTLE) /* not counted: a verdict on these
                                        would undo it at once */
                window(700, 0, 4, 0.8, 350, raised, 350, 0.2);
            else if (pays)
                window(1000, 0, 4, 0.5, 500, raised, 500, 0.25);
            else /* its pace after (905/s) is not the slower */
                window(905, 0, 4, 0.8, 452, raised, 453, 0.2);
            /* paid: 9 others over its window (11 want the cores, 2 of
             * them the decoders) */
            loader(10, 3, pays && i >= SL_PLACE_SETTLE ? 11 : 12);
            int r =
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
            assert_int_equal(r, !pays && i == windows - 1);
            assert_int_equal(p.trial, i < windows - 1);
        }
        assert_int_equal(p.trial, 0);
        if (!pays) {
            assert_int_equal(share, 200);
            assert_non_null(strstr(why, "did not pay"));
            assert_true(p.best_work > 0.001109 && p.best_work < 0.001113);
            /* its pace now is its best: no raise for it again (a shed
             * may come: the CPU could carry it) */
            cur.gpu_share = share;
            for (int i = 0; i < 6; i++) {
                window(900, 0, 4, 0.8, 720, 200, 180, 0.09);
                loader(10, 3, 12);
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why);
                assert_true(share <= 200);
            }
            assert_int_equal(p.raises, 1);
            continue;
        }
        assert_int_equal(share, raised);
        assert_int_equal(p.starve_floor, raised);
        /* Calm, and the CPU could carry it all (7 decoders at 4 ms): no
         * shed while 12 threads want the 8 cores ... */
        window(1000, 0, 4, 0.5, 500, raised, 500, 0.25);
        loader(10, 3, 12);
        for (int i = 0; i < 4 * SL_PLACE_CALM; i++)
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                0);
        /* the decoders' 2 busy threads as they would be back at 200: the
         * CPU part of a batch 0.8 over 0.5 */
        assert_true(p.floor_ours > 3.1 && p.floor_ours < 3.3);
        /* ... nor while the others stay: 8 want them with the decoders
         * idle (the run queue falls with the decoders' work, the share
         * itself cuts it, and it is noisy), or 7 others ... */
        for (int i = 0; i < 2 * SL_PLACE_CALM; i++) {
            window(1000, 0, 4, i % 2 ? 0 : 0.5, i % 2 ? 0 : 500, raised, 500,
                   0.25);
            loader(10, 3, i % 2 ? 8 : 9);
            assert_int_equal(
                sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
                0);
            assert_int_equal(p.starve_floor, raised);
        }
        /* ... but once, SL_PLACE_CALM windows in a row, they would leave
         * the cores uncontended with the decoders back at 200 (4.6
         * others: 4.6 + 3.2 of 8, not 5: 8.2; 7.6 want the cores, 2 of
         * them the decoders, 1 the GPU stage), it is shed (at most
         * halved). A window between that would not (10 others) starts
         * the count again. */
        for (int few = 0; few < 2; few++) {
            sl__place_t q = p;
            for (int i = 0; i < 2 * SL_PLACE_CALM; i++) {
                int crowd = i == SL_PLACE_CALM - 1;
                window(1000, 0, 4, 0.5, 500, raised, 500, 0.25);
                loader(10, 3, 0);
                for (int j = 0; j < N; j++) {        /* the stage's own thread
                                                        is not the others' */
                    w[j].run_queue = crowd ? 12 : 7; /* an int: 7.6 was 7 */
                    w[j].gpu_cpu_busy = few ? 1.0 : 0;
                }
                int r = sl__place_step(&q, w, N, &lim, &cur, &share, why,
                                       sizeof why);
                assert_int_equal(r, few && i == 2 * SL_PLACE_CALM - 1);
            }
            assert_int_equal(share, few ? raised / 2 : raised);
        }
        assert_non_null(strstr(why, "calm"));
    }
}

/* The model's rate at the share in force is at least what the paths
 * made: 2 decoders at 440/s and a stage of 2,000/s at 808 per mille, the
 * model says 2,292/s (the CPU's part) and +6 % at 821 (the balance).
 * Where the paths made 2,370/s the GPU is the bound already (+3 % at
 * most): no raise; where they made 2,200/s, the raise. */
static void test_the_model_is_no_lower_than_what_was_made(void **state)
{
    (void)state;
    sl__limits_t lim = limits(2);
    sl__knobs_t cur = {1, 2, 4, 808};
    char why[SL_SCHED_REASON];
    int share;
    for (int made_more = 0; made_more < 2; made_more++) {
        sl__place_t p;
        sl__place_init(&p);
        double gpu = made_more ? 1930 : 1760;
        window(440 + gpu, 0.99, 2, 1.0, 440, 808, gpu, gpu / 2000);
        loader(64, 0, 0);
        assert_int_equal(
            sl__place_step(&p, w, N, &lim, &cur, &share, why, sizeof why),
            !made_more);
        assert_int_equal(share, made_more ? 808 : 821);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_short_and_waiting_raises_the_share),
        cmocka_unit_test(test_a_raise_that_slows_the_trainer_is_undone),
        cmocka_unit_test(test_cpu_with_room_is_the_decoders_job),
        cmocka_unit_test(
            test_calm_sheds_and_a_shed_that_brings_waits_is_undone),
        cmocka_unit_test(test_a_small_share_is_shed_to_none),
        cmocka_unit_test(test_a_shed_moves_a_slot),
        cmocka_unit_test(test_no_raise_when_nvml_says_the_gpu_is_full),
        cmocka_unit_test(test_nothing_without_the_scheduler_placing),
        cmocka_unit_test(test_the_tick_places_first_and_alone),
        cmocka_unit_test(test_the_estimate_asks_decoders_for_the_cpus_part),
        cmocka_unit_test(test_the_estimate_counts_the_hand_over),
        cmocka_unit_test(test_the_balance_counts_the_hand_over),
        cmocka_unit_test(test_a_small_raise_near_the_balance),
        cmocka_unit_test(test_a_raise_moves_a_slot),
        cmocka_unit_test(test_no_raise_where_the_gpu_path_saves_no_cpu),
        cmocka_unit_test(test_a_draining_buffer_raises_before_the_wait),
        cmocka_unit_test(test_a_verdict_waits_for_enough_batches),
        cmocka_unit_test(test_a_clear_failure_is_undone_at_once),
        cmocka_unit_test(test_the_model_is_no_lower_than_what_was_made),
        cmocka_unit_test(test_a_starved_trainer_gets_cores_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
