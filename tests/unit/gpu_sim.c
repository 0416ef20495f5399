/* The simulated GPU stage (see gpu_sim.h). One worker thread takes
 * submitted groups in order; done comes from that thread, as the real
 * stage's comes from CUDA's callback thread. */
#include "gpu_sim.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct group {
    sl__gpu_job_t *const *jobs;
    int n;
    sl__gpu_done_fn done;
    void *ctx;
    struct group *next;
} group_t;

typedef struct sim {
    sl__gpu_stage_t ops; /* first: the stage pointer is the sim's */
    sl__xform_t x;
    gpu_sim_refuse_fn refuse;
    void *refuse_ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_idle;
    group_t *head, *tail;
    int busy, stop;
    long submitted, finished, taken;
    sl__scratch_t *scratch;
    pthread_t thread;
} sim_t;

static void run_job(sim_t *s, sl__gpu_job_t *j, sl__gpu_done_fn done, void *ctx)
{
    const char *why = "";
    if (j->n >= 8 && memcmp(j->bytes, "\x89PNG", 4) == 0) {
        done(ctx, j, SL__GPU_REFUSED, "PNG (nvJPEG decodes JPEG only)");
        return;
    }
    for (int i = 0; i < 4; i++)
        if (j->box[i] != floor(j->box[i])) {
            done(ctx, j, SL__GPU_REFUSED, "a box that is not whole pixels");
            return;
        }
    if (s->refuse && s->refuse(j, s->refuse_ctx, &why)) {
        done(ctx, j, SL__GPU_REFUSED, why);
        return;
    }
    sl__xform_t x = s->x;
    x.mode = SL_XF_BOX;
    x.box = (sl__crop_t){(int)j->box[0], (int)j->box[1],
                         (int)(j->box[2] - j->box[0]),
                         (int)(j->box[3] - j->box[1])};
    x.flip = j->flip;
    char err[256];
    int rc = sl__image_process(j->bytes, j->n, &x, NULL, NULL, s->scratch,
                               j->out, err, sizeof err);
    pthread_mutex_lock(&s->mu);
    s->taken++;
    pthread_mutex_unlock(&s->mu);
    done(ctx, j, rc ? SL__GPU_FAILED : SL__GPU_DONE, rc ? err : "");
}

static void *sim_main(void *arg)
{
    sim_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (!s->head)
            break;
        group_t *g = s->head;
        s->head = g->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < g->n; i++)
            run_job(s, g->jobs[i], g->done, g->ctx);
        pthread_mutex_lock(&s->mu);
        s->finished += g->n;
        s->busy = 0;
        free(g);
        pthread_cond_broadcast(&s->cv_idle);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int sim_submit(sl__gpu_stage_t *st, sl__gpu_job_t *const *jobs, int n,
                      sl__gpu_done_fn done, void *ctx)
{
    sim_t *s = (sim_t *)st;
    group_t *g = calloc(1, sizeof *g);
    if (!g)
        return SL_ENOMEM;
    *g = (group_t){jobs, n, done, ctx, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = g;
    else
        s->head = g;
    s->tail = g;
    s->submitted += n;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void sim_drain(sl__gpu_stage_t *st)
{
    sim_t *s = (sim_t *)st;
    pthread_mutex_lock(&s->mu);
    while (s->finished < s->submitted)
        pthread_cond_wait(&s->cv_idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void sim_destroy(sl__gpu_stage_t *st)
{
    if (!st)
        return;
    sim_t *s = (sim_t *)st;
    sim_drain(st);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    sl__scratch_destroy(s->scratch);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_idle);
    free(s);
}

long gpu_sim_done(sl__gpu_stage_t *st)
{
    sim_t *s = (sim_t *)st;
    pthread_mutex_lock(&s->mu);
    long n = s->taken;
    pthread_mutex_unlock(&s->mu);
    return n;
}

sl__gpu_stage_t *gpu_sim_create(const sl__xform_t *x, gpu_sim_refuse_fn refuse,
                                void *refuse_ctx)
{
    sim_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ops = (sl__gpu_stage_t){.submit = sim_submit,
                               .drain = sim_drain,
                               .destroy = sim_destroy}; /* no device memory */
    s->x = *x;
    s->refuse = refuse;
    s->refuse_ctx = refuse_ctx;
    s->scratch = sl__scratch_create();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_idle, NULL);
    if (!s->scratch || pthread_create(&s->thread, NULL, sim_main, s)) {
        sl__scratch_destroy(s->scratch);
        free(s);
        return NULL;
    }
    return &s->ops;
}
