/* gpu/cuda_stage: the real GPU stage (see cuda_stage.h). */
#include "gpu/cuda_stage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "gpu/devbuf.h"
#include "gpu/kernel_load.h"
#include "gpu/nvalloc.h"
#include "gpu/resample.h"
#include "gpu/rt.h"

int sl__cuda_stage_built(void)
{
    return sl__gpu_kernels_built();
}

/* One queued job. */
typedef struct node {
    sl__gpu_job_t *job;
    sl__gpu_done_fn done;
    void *ctx;
    struct node *next;
} node_t;

/* A group in flight: its memory, stream, decoder state and jobs. */
typedef struct slot {
    uint8_t *h; /* pinned: plans, coefficients, outputs */
    uint8_t *d; /* device: the same three, then the arena */
    sl__cuda_stream_t stream;
    sl__cuda_event_t done_ev;
    sl__nvjpeg_state_t jstate;
    int init_n; /* the batch size nvJPEG was initialised for */
    int n;      /* jobs in the group (0: free) */
    node_t *jobs[SL__GPU_GROUP_MAX];
    const unsigned char *data[SL__GPU_GROUP_MAX];
    size_t lens[SL__GPU_GROUP_MAX];
    sl__nvjpeg_image_t img[SL__GPU_GROUP_MAX];
    sl__nvjpeg_params_t params[SL__GPU_GROUP_MAX]; /* ROI: one per image */
} slot_t;

typedef struct cstage {
    sl__gpu_stage_t ops; /* first: the stage pointer is this */
    const sl__gpu_rt_t *rt;
    sl__xform_t x;
    size_t sample_bytes;
    int device, gmax;
    size_t plans_off, coef_off, out_off, arena_off; /* in each slot */
    size_t coef_cap, arena_cap, slot_bytes;
    size_t bits_off, bits_cap; /* the pinned bitstreams (host side only) */
    int pageable_bits;         /* SL_GPU_PAGEABLE_BITS=1: not copied */
    int roi; /* 1: each image decoded to the region its plan reads (the
                feeder's; stats.roi its copy under mu) */
    /* The hardware backend's per-image check (the feeder's, as roi): a
     * JPEG stream for the headers, and whole-image parameters for the
     * images decoded without a region. */
    int hw_check;
    sl__nvjpeg_stream_t js;
    sl__nvjpeg_params_t whole;
    float lut[3][256];
    sl__nvjpeg_t jh;
    sl__gpu_kernels_t kern; /* loaded at create, on its device */
    slot_t slot[2];
    sl__scratch_t *scratch; /* the feeder's planner */
    sl__devbufs_t bufs;     /* device batch buffers, their copies */

    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_slot, cv_idle;
    node_t *head, *tail;
    int stop, launched, completed; /* groups: slot = index % 2 */
    long long submitted, finished;
    sl__cuda_stage_stats_t stats;
    pthread_t feeder, completer;
    int threads;
    int counted; /* joined the allocator cache (gpu/nvalloc.h) */
} cstage_t;

#define ALIGN(n) (((n) + 255) & ~(size_t)255)

static void finish(cstage_t *s, node_t *nd, int status, const char *why)
{
    nd->done(nd->ctx, nd->job, status, why);
    free(nd);
    pthread_mutex_lock(&s->mu);
    s->finished++;
    if (status == SL__GPU_REFUSED)
        s->stats.refused++;
    else
        s->stats.samples++;
    if (s->finished == s->submitted)
        pthread_cond_broadcast(&s->cv_idle);
    pthread_mutex_unlock(&s->mu);
}

static const char *cuda_why(cstage_t *s, sl__cuda_err_t e)
{
    const char *m = s->rt->get_error_string(e);
    return m ? m : "unknown CUDA error";
}

/* Refuses every job of a group that could not run. */
static void refuse_group(cstage_t *s, slot_t *sl, const char *why)
{
    for (int i = 0; i < sl->n; i++)
        finish(s, sl->jobs[i], SL__GPU_REFUSED, why);
    sl->n = 0;
}

/* A group's fill of a slot: bytes used of each area, and the pixels its
 * images have and those decoded. */
typedef struct cursor {
    size_t coef, arena, bits;
    double px_img, px_dec;
} cursor_t;

/* Whether the hardware decoder takes job j decoded with parameters p
 * (its region, or the whole image): 0 when it does; -1 when not, why
 * naming it (the job is refused, for the CPU path, rather than failing
 * its whole group in the batched decode). A header nvJPEG cannot parse is
 * refused too (the batch would fail on it); another status from the
 * check turns the check off (stats.hw_check_off), as if the library
 * lacked it. */
static int hw_refuses(cstage_t *s, const sl__gpu_job_t *j,
                      sl__nvjpeg_params_t p, char *why, size_t wl)
{
    const sl__gpu_rt_t *rt = s->rt;
    int no = 0;
    int je = rt->nvjpeg_stream_parse_header(s->jh, j->bytes, j->n, s->js);
    if (je == SL__NVJPEG_BAD_JPEG || je == SL__NVJPEG_JPEG_NOT_SUPPORTED) {
        snprintf(why, wl, "nvJPEG cannot parse its header (status %d)", je);
        no = 1;
    } else if (!je) {
        int ns = 0; /* nvJPEG's is_supported: 0 when it is */
        je = rt->nvjpeg_batched_supported_ex(s->jh, s->js, p, &ns);
        no = !je && ns != 0;
        if (no)
            snprintf(why, wl,
                     "the hardware JPEG decoder does not take it "
                     "(nvjpegDecodeBatchedSupportedEx)");
    }
    pthread_mutex_lock(&s->mu);
    if (je && !no) {
        s->hw_check = 0;
        s->stats.hw_check = 0;
        s->stats.hw_check_off = je;
    }
    if (no)
        s->stats.hw_unsupported++;
    pthread_mutex_unlock(&s->mu);
    return no ? -1 : 0;
}

/* The plan of one job into the slot's host memory at the group's cursor,
 * its bitstream copied into the slot's pinned area (nvJPEG then copies it
 * to the device asynchronously; from pageable memory each copy is
 * synchronous: bench/RESULTS.md, the H200 profile). With s->roi the image
 * is decoded to the region its plan reads (sl__gpu_roi), through the
 * image's decode parameters; with s->hw_check the hardware decoder is
 * asked whether it takes the image so. 0; 1 when the group is full; -1
 * with a refusal reason in why; 2 when nvJPEG refused the region (status
 * in *je). */
static int plan_job(cstage_t *s, slot_t *sl, int i, const sl__jpeg_frame_t *f,
                    cursor_t *at, int *je, char *why, size_t wl)
{
    sl__gpu_job_t *j = sl->jobs[i]->job;
    sl__image_plan_t ip;
    if (sl__image_plan(&s->x, f->w, f->h, j->box, j->flip, s->scratch, &ip, why,
                       wl))
        return -1;
    size_t hb = (size_t)ip.out_w * 2 * 4, hk = (size_t)ip.out_w * ip.hk * 4;
    size_t vb = (size_t)ip.out_h * 2 * 4, vk = (size_t)ip.out_h * ip.vk * 4;
    size_t cneed = ALIGN(hb + hk + vb + vk);
    /* The whole image's room even for a region: a decoder that ignored
     * the region would write the whole image, and must not write past
     * the sample's area (tests/gpu/gpu_check.c checks it on each GPU). */
    size_t dec = ALIGN((size_t)f->w * f->h * 3);
    size_t tmp = ALIGN(
        (ip.vfirst ? (size_t)ip.out_h * ip.hn : (size_t)ip.vn * ip.out_w) * 3);
    if (cneed > s->coef_cap || dec + tmp > s->arena_cap) {
        snprintf(why, wl,
                 "a %dx%d image needs %zu MiB of GPU memory; the stage's "
                 "slot holds %zu MiB",
                 f->w, f->h, (dec + tmp + cneed) >> 20,
                 (s->arena_cap + s->coef_cap) >> 20);
        return -1;
    }
    /* A bitstream larger than the pinned area is read from where it is. */
    size_t bneed = s->pageable_bits || j->n > s->bits_cap ? 0 : ALIGN(j->n);
    if (at->coef + cneed > s->coef_cap ||
        at->arena + dec + tmp > s->arena_cap || at->bits + bneed > s->bits_cap)
        return 1; /* the group is full: next group */
    int rx = 0, ry = 0, rw = f->w, rh = f->h;
    if (s->roi) {
        sl__gpu_roi(f->w, f->h, 8 * f->hs[0], 8 * f->vs[0], ip.ox, ip.oy, ip.hn,
                    ip.vn, &rx, &ry, &rw, &rh);
        *je = s->rt->nvjpeg_params_set_roi(sl->params[i], rx, ry, rw, rh);
        if (*je)
            return 2;
    }
    if (s->hw_check &&
        hw_refuses(s, j, s->roi ? sl->params[i] : s->whole, why, wl))
        return -1;
    uint8_t *hc = sl->h + s->coef_off + at->coef;
    uint8_t *dc = sl->d + s->coef_off + at->coef;
    memcpy(hc, ip.hb, hb);
    memcpy(hc + hb, ip.hkk, hk);
    memcpy(hc + hb + hk, ip.vb, vb);
    memcpy(hc + hb + hk + vb, ip.vkk, vk);
    uint8_t *src = sl->d + s->arena_off + at->arena;
    /* A device batch's slot is written where it is; a host one through
     * the slot's output area, copied back. */
    uint8_t *out =
        j->out_dev ? j->out : sl->d + s->out_off + (size_t)i * s->sample_bytes;
    sl__gpu_plan_t p = {.src = src,
                        .tmp = src + dec,
                        .out = out,
                        .hb = (const int32_t *)dc,
                        .hkk = (const int32_t *)(dc + hb),
                        .vb = (const int32_t *)(dc + hb + hk),
                        .vkk = (const int32_t *)(dc + hb + hk + vb),
                        .lut =
                            (const float *)(sl->d + s->coef_off + s->coef_cap)};
    sl__gpu_plan_geometry(&p, &ip, &s->x, rw);
    p.ox -= rx, p.oy -= ry; /* within the region */
    memcpy(sl->h + s->plans_off + (size_t)i * sizeof p, &p, sizeof p);
    sl->img[i] = (sl__nvjpeg_image_t){{src, NULL, NULL, NULL},
                                      {(size_t)rw * 3, 0, 0, 0}};
    if (bneed) {
        uint8_t *b = sl->h + s->bits_off + at->bits;
        memcpy(b, j->bytes, j->n);
        sl->data[i] = b;
    } else {
        sl->data[i] = j->bytes;
    }
    sl->lens[i] = j->n;
    at->coef += cneed;
    at->arena += dec + tmp;
    at->bits += bneed;
    at->px_img += (double)f->w * f->h;
    at->px_dec += (double)rw * rh;
    return 0;
}

/* Queues the group's work on its stream; 0, or -1 to refuse it (why),
 * or the nvJPEG status with which the ROI decode was refused (> 0: the
 * group is to be planned again without regions). Either way nothing is
 * left queued on its buffers when it fails: the slot's next group writes
 * them, and nvJPEG's initialise may free what a failed decode's queued
 * copies read. */
static int launch(cstage_t *s, slot_t *sl, size_t coef_bytes, char *why,
                  size_t wl)
{
    const sl__gpu_rt_t *rt = s->rt;
    int n = sl->n;
    /* First, while the slot's stream is idle (its last group waited for):
     * nvJPEG's initialise names no stream, and its frees with it. */
    if (sl->init_n != n) {
        int je = rt->nvjpeg_batched_init(s->jh, sl->jstate, n, 1,
                                         SL__NVJPEG_OUTPUT_RGBI);
        if (je) {
            snprintf(why, wl, "nvJPEG: batched init of %d: status %d", n, je);
            sl->init_n = 0;
            return -1;
        }
        sl->init_n = n;
    }
    sl__cuda_err_t e = rt->memcpy_async(
        sl->d + s->plans_off, sl->h + s->plans_off,
        s->coef_off - s->plans_off + coef_bytes, SL__H2D, sl->stream);
    if (e) {
        snprintf(why, wl, "GPU stage: copy to the GPU: %s", cuda_why(s, e));
        rt->stream_synchronize(sl->stream);
        return -1;
    }
    int je = s->roi ? rt->nvjpeg_decode_batched_ex(s->jh, sl->jstate, sl->data,
                                                   sl->lens, sl->img,
                                                   sl->params, sl->stream)
                    : rt->nvjpeg_decode_batched(s->jh, sl->jstate, sl->data,
                                                sl->lens, sl->img, sl->stream);
    if (je) {
        /* nvJPEG's guide: after a failed batch, initialise again; the
         * plans' copy, and what nvJPEG queued before failing, waited for */
        sl->init_n = 0;
        rt->stream_synchronize(sl->stream);
    }
    /* The region refused as such (not an image's fault): whole images from
     * now on. Other statuses (a bad or unsupported image, memory) refuse
     * this group only, as without regions. */
    if (s->roi &&
        (je == SL__NVJPEG_INVALID_PARAMETER || je == SL__NVJPEG_NOT_SUPPORTED))
        return je;
    if (je) {
        snprintf(why, wl, "nvJPEG: batched decode of %d images: status %d%s", n,
                 je,
                 je == 3   ? " (bad JPEG)"
                 : je == 4 ? " (not supported)"
                           : "");
        return -1;
    }
    /* Enough blocks per sample to cover a 224 x 224 output in one go;
     * larger ones grid-stride. */
    int bx = 49 * 4;
    void *args[] = {NULL};
    void *plans = sl->d + s->plans_off;
    args[0] = &plans;
    sl__dim3_t grid = {(unsigned)bx, (unsigned)n, 1}, block = {256, 1, 1};
    /* Samples written into device batches: not before the consumer's
     * reads of the buffer's last batch are done (its release's fence; a
     * group's jobs come from a batch or two: each fence waited once). */
    sl__cuda_event_t waited = NULL;
    for (int i = 0; i < n && !e; i++) {
        sl__gpu_job_t *j = sl->jobs[i]->job;
        sl__cuda_event_t f =
            j->out_dev ? sl__devbufs_fence(&s->bufs, j->out) : NULL;
        if (f && f != waited)
            e = rt->stream_wait_event(sl->stream, f, 0);
        waited = f ? f : waited;
    }
    int kr = 0;
    char kwhy[160] = "";
    for (int k = 0; k < 2 && !e && !kr; k++)
        kr = sl__gpu_kernels_launch(&s->kern, k, grid, block, args, sl->stream,
                                    kwhy, sizeof kwhy);
    int back = 0; /* samples going to host batches: copied back */
    for (int i = 0; i < n; i++)
        back += !sl->jobs[i]->job->out_dev;
    if (!e && !kr && back)
        e = rt->memcpy_async(sl->h + s->out_off, sl->d + s->out_off,
                             (size_t)n * s->sample_bytes, SL__D2H, sl->stream);
    if (!e && !kr)
        e = rt->event_record(sl->done_ev, sl->stream);
    if (e || kr) {
        snprintf(why, wl, "GPU stage: kernels: %s", e ? cuda_why(s, e) : kwhy);
        /* What was queued may still run on the buffers: wait it out. */
        rt->stream_synchronize(sl->stream);
        return -1;
    }
    return 0;
}

/* nvJPEG refused the ROI decode (status je): the stage decodes whole
 * images from now on, and the group's jobs (then `carry`, the one that
 * did not fit) go back to the head of the queue in their order, to be
 * planned again, so no sample's pixels depend on when this happened. */
static void roi_off(cstage_t *s, slot_t *sl, node_t *carry, int je)
{
    s->roi = 0;
    pthread_mutex_lock(&s->mu);
    s->stats.roi = 0;
    s->stats.roi_off = je;
    for (int k = sl->n; k >= 0; k--) {
        node_t *nd = k == sl->n ? carry : sl->jobs[k];
        if (!nd)
            continue;
        nd->next = s->head;
        s->head = nd;
        if (!s->tail)
            s->tail = nd;
    }
    pthread_mutex_unlock(&s->mu);
    sl->n = 0;
}

static void *feeder_main(void *arg)
{
    cstage_t *s = arg;
    const sl__gpu_rt_t *rt = s->rt;
    rt->set_device(s->device);
    node_t *carry = NULL; /* a job that did not fit the last group */
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!carry && !s->head && !s->stop)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (!carry && !s->head) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        /* The next slot, once its last group is copied out. */
        while (s->launched - s->completed >= 2)
            pthread_cond_wait(&s->cv_slot, &s->mu);
        slot_t *sl = &s->slot[s->launched % 2];
        pthread_mutex_unlock(&s->mu);

        cursor_t at = {0, 0, 0, 0, 0};
        sl->n = 0;
        for (;;) {
            node_t *nd = carry;
            carry = NULL;
            if (!nd) {
                pthread_mutex_lock(&s->mu);
                nd = s->head;
                if (nd) {
                    s->head = nd->next;
                    if (!s->head)
                        s->tail = NULL;
                }
                pthread_mutex_unlock(&s->mu);
            }
            if (!nd)
                break;
            sl__gpu_job_t *j = nd->job;
            sl__jpeg_frame_t f;
            char why[256];
            const char *no = NULL;
            if (j->n >= 4 && !memcmp(j->bytes, "\x89PNG", 4))
                no = "PNG (nvJPEG decodes JPEG only)";
            else if (sl__jpeg_frame(j->bytes, j->n, &f, why, sizeof why))
                no = why;
            else
                no = sl__gpu_jpeg_refusal(&f);
            if (no) {
                finish(s, nd, SL__GPU_REFUSED, no);
                continue;
            }
            sl->jobs[sl->n] = nd;
            int je = 0;
            int rc = plan_job(s, sl, sl->n, &f, &at, &je, why, sizeof why);
            if (rc == 2) { /* the region refused: this job is redone too */
                sl->n++;
                roi_off(s, sl, NULL, je);
                at = (cursor_t){0, 0, 0, 0, 0};
                continue;
            }
            if (rc < 0) {
                finish(s, nd, SL__GPU_REFUSED, why);
                continue;
            }
            if (rc > 0) {
                carry = nd;
                break;
            }
            if (++sl->n == s->gmax)
                break;
        }
        if (!sl->n)
            continue;
        char why[256];
        int rc = launch(s, sl, at.coef, why, sizeof why);
        if (rc > 0) {
            roi_off(s, sl, carry, rc);
            carry = NULL;
            continue;
        }
        if (rc) {
            refuse_group(s, sl, why);
            continue;
        }
        pthread_mutex_lock(&s->mu);
        s->launched++;
        s->stats.groups++;
        if (sl->n > s->stats.largest_group)
            s->stats.largest_group = sl->n;
        s->stats.px_images += at.px_img;
        s->stats.px_decoded += at.px_dec;
        if (s->roi)
            s->stats.roi_samples += sl->n;
        pthread_cond_broadcast(&s->cv_slot);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static void *completer_main(void *arg)
{
    cstage_t *s = arg;
    const sl__gpu_rt_t *rt = s->rt;
    rt->set_device(s->device);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->completed == s->launched && !s->stop)
            pthread_cond_wait(&s->cv_slot, &s->mu);
        if (s->completed == s->launched) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        slot_t *sl = &s->slot[s->completed % 2];
        pthread_mutex_unlock(&s->mu);
        sl__cuda_err_t e = rt->event_synchronize(sl->done_ev);
        if (e) {
            char why[256];
            snprintf(why, sizeof why, "GPU stage: %s", cuda_why(s, e));
            refuse_group(s, sl, why);
        } else {
            for (int i = 0; i < sl->n; i++) {
                node_t *nd = sl->jobs[i];
                if (!nd->job->out_dev)
                    memcpy(nd->job->out,
                           sl->h + s->out_off + (size_t)i * s->sample_bytes,
                           s->sample_bytes);
                finish(s, nd, SL__GPU_DONE, "");
            }
            sl->n = 0;
        }
        pthread_mutex_lock(&s->mu);
        s->completed++;
        pthread_cond_broadcast(&s->cv_slot);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static int cs_submit(sl__gpu_stage_t *st, sl__gpu_job_t *const *jobs, int n,
                     sl__gpu_done_fn done, void *ctx)
{
    cstage_t *s = (cstage_t *)st;
    node_t *first = NULL, *last = NULL;
    for (int i = 0; i < n; i++) {
        node_t *nd = malloc(sizeof *nd);
        if (!nd) {
            while (first) {
                node_t *nx = first->next;
                free(first);
                first = nx;
            }
            return SL_ENOMEM;
        }
        *nd = (node_t){jobs[i], done, ctx, NULL};
        if (last)
            last->next = nd;
        else
            first = nd;
        last = nd;
    }
    if (!first)
        return 0;
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = first;
    else
        s->head = first;
    s->tail = last;
    s->submitted += n;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void cs_drain(sl__gpu_stage_t *st)
{
    cstage_t *s = (cstage_t *)st;
    pthread_mutex_lock(&s->mu);
    while (s->finished < s->submitted)
        pthread_cond_wait(&s->cv_idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void *cs_dev_alloc(sl__gpu_stage_t *st, size_t bytes)
{
    return sl__devbufs_alloc(&((cstage_t *)st)->bufs, bytes);
}

static void cs_dev_release(sl__gpu_stage_t *st, void *p, void *stream)
{
    sl__devbufs_release(&((cstage_t *)st)->bufs, p, stream);
}

static void cs_dev_free(sl__gpu_stage_t *st, void *p)
{
    sl__devbufs_free(&((cstage_t *)st)->bufs, p);
}

static int cs_copy(sl__gpu_stage_t *st, void *dst, const void *src, size_t n,
                   int kind, char *why, size_t wl)
{
    cstage_t *s = (cstage_t *)st;
    sl__cuda_err_t e = sl__devbufs_copy(&s->bufs, dst, src, n, kind);
    if (!e)
        return 0;
    snprintf(why, wl, "GPU stage: copying %zu bytes %s: %s", n,
             kind == SL__GPU_COPY_H2D ? "to the GPU" : "on the GPU",
             cuda_why(s, e));
    return SL_ESYSTEM;
}

static void release(cstage_t *s)
{
    const sl__gpu_rt_t *rt = s->rt;
    /* nvJPEG's objects first, each state once its slot's stream is idle
     * (their frees, with that stream or none, must not race its work),
     * the handle once both are: their frees name the slots' streams or
     * none (the allocator cache records events there, or on the stream
     * the block was allocated on), which go after them. */
    for (int k = 0; k < 2; k++) {
        slot_t *sl = &s->slot[k];
        if (sl->stream)
            rt->stream_synchronize(sl->stream);
        for (int i = 0; i < SL__GPU_GROUP_MAX; i++)
            if (sl->params[i])
                rt->nvjpeg_params_destroy(sl->params[i]);
        if (sl->jstate)
            rt->nvjpeg_state_destroy(sl->jstate);
    }
    if (s->js)
        rt->nvjpeg_stream_destroy(s->js);
    if (s->whole)
        rt->nvjpeg_params_destroy(s->whole);
    if (s->jh)
        rt->nvjpeg_destroy(s->jh);
    sl__devbufs_close(&s->bufs); /* the fences of buffers not freed */
    for (int k = 0; k < 2; k++) {
        slot_t *sl = &s->slot[k];
        if (sl->done_ev)
            rt->event_destroy(sl->done_ev);
        if (sl->stream) {
            rt->stream_synchronize(sl->stream); /* the frees' events */
            rt->stream_destroy(sl->stream);
        }
        if (sl->h)
            rt->host_free(sl->h);
        if (sl->d)
            rt->dev_free(sl->d);
    }
    if (s->counted)
        sl__nvalloc_leave(rt, s->device);
    sl__gpu_kernels_unload(&s->kern);
    sl__scratch_destroy(s->scratch);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_slot);
    pthread_cond_destroy(&s->cv_idle);
    free(s);
}

static void cs_destroy(sl__gpu_stage_t *st)
{
    cstage_t *s = (cstage_t *)st;
    if (!s)
        return;
    cs_drain(st);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv_work);
    pthread_cond_broadcast(&s->cv_slot);
    pthread_mutex_unlock(&s->mu);
    if (s->threads > 0)
        pthread_join(s->feeder, NULL);
    if (s->threads > 1)
        pthread_join(s->completer, NULL);
    /* nvJPEG's handle and states are bound to the device current at their
     * making (its guide): undone on it, the caller's set back after */
    const sl__gpu_rt_t *rt = s->rt;
    int dev = s->device, was = sl__gpu_rt_caller_device(rt);
    rt->set_device(dev);
    release(s);
    sl__gpu_rt_caller_back(rt, dev, was);
}

int sl__cuda_stage_count(void)
{
    return sl__nvalloc_users();
}

size_t sl__cuda_stage_nvjpeg_bytes(void)
{
    return sl__nvalloc_dev_bytes();
}

/* CPU seconds thread t has used (its CPU clock); 0 where it cannot tell. */
static double thread_cpu_s(pthread_t t)
{
    clockid_t c;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &c) || clock_gettime(c, &ts))
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sl__cuda_stage_stats(sl__gpu_stage_t *st, sl__cuda_stage_stats_t *out)
{
    cstage_t *s = (cstage_t *)st;
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
    /* Both threads live from create to destroy (its caller's stage). */
    out->cpu_s = thread_cpu_s(s->feeder) + thread_cpu_s(s->completer);
}

/* 1 when the environment sets name to value (the stage's switches for
 * measuring: bench/gpu/README.md). */
static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each kernel launched once on slot 0's stream over one empty plan (no
 * elements: nothing is read or written), waited for: with lazy loading
 * (CUDA_MODULE_LOADING=LAZY, CUDA 12.2's default) a library's kernel is
 * loaded into the context at its first launch, which would otherwise be
 * the first group's, and a kernel that cannot run on this GPU fails here,
 * at create, rather than refusing every group. 0, or the failure in why. */
static int kernels_warm(cstage_t *s, char *why, size_t wl)
{
    const sl__gpu_rt_t *rt = s->rt;
    slot_t *sl = &s->slot[0];
    memset(sl->h + s->plans_off, 0, sizeof(sl__gpu_plan_t));
    sl__cuda_err_t e =
        rt->memcpy_async(sl->d + s->plans_off, sl->h + s->plans_off,
                         sizeof(sl__gpu_plan_t), SL__H2D, sl->stream);
    void *plans = sl->d + s->plans_off;
    void *args[] = {&plans};
    sl__dim3_t one = {1, 1, 1}, block = {256, 1, 1};
    int kr = 0;
    for (int k = 0; k < 2 && !e && !kr; k++)
        kr = sl__gpu_kernels_launch(&s->kern, k, one, block, args, sl->stream,
                                    why, wl);
    sl__cuda_err_t se = rt->stream_synchronize(sl->stream);
    if (!e)
        e = se;
    if (e && !kr)
        snprintf(why, wl, "a first launch: %s", cuda_why(s, e));
    return e || kr;
}

/* The hardware backend's extras, each where the library has it (a
 * failure turns it off, never the stage): the per-image check's JPEG
 * stream and whole-image parameters, and its buffers preallocated for a
 * full group of images up to SL_GPU_PREALLOC=WxH (default 512x512, the
 * most of an ImageNet photo's sides; 0 skips it) at 4:4:4, which covers
 * the other subsamplings of that size. */
static void hw_setup(cstage_t *s)
{
    const sl__gpu_rt_t *rt = s->rt;
    if (sl__gpu_rt_hw_check(rt)) {
        int je = rt->nvjpeg_stream_create(s->jh, &s->js);
        if (!je)
            je = rt->nvjpeg_params_create(s->jh, &s->whole);
        if (!je)
            je = rt->nvjpeg_params_set_format(s->whole, SL__NVJPEG_OUTPUT_RGBI);
        s->hw_check = !je;
        s->stats.hw_check = s->hw_check;
        s->stats.hw_check_off = je;
    }
    const char *pa = getenv("SL_GPU_PREALLOC");
    int w = 512, h = 512;
    if (pa && sscanf(pa, "%dx%d", &w, &h) != 2)
        w = h = 0;
    if (!rt->nvjpeg_batched_prealloc || w <= 0 || h <= 0)
        return;
    int je = 0;
    for (int k = 0; k < 2 && !je; k++)
        je = rt->nvjpeg_batched_prealloc(s->jh, s->slot[k].jstate, s->gmax, w,
                                         h, SL__NVJPEG_CSS_444,
                                         SL__NVJPEG_OUTPUT_RGBI);
    s->stats.prealloc_err = je;
    s->stats.prealloc_w = je ? 0 : w;
    s->stats.prealloc_h = je ? 0 : h;
}

/* The slots' sizes within the budget: per slot, plans and outputs for
 * gmax samples, 8 MiB of coefficients (+ the table), the rest arena. */
static int size_slots(cstage_t *s, size_t budget, char *err, size_t errlen)
{
    size_t half = budget / 2;
    /* SL_GPU_GROUP=N: groups of at most N samples (for measuring what
     * the group's size does to the training step: bench/gpu) */
    const char *g = getenv("SL_GPU_GROUP");
    int want = g ? atoi(g) : 0;
    s->gmax = want >= 1 && want < SL__GPU_GROUP_MAX ? want : SL__GPU_GROUP_MAX;
    while (s->gmax > 1 && (size_t)s->gmax * s->sample_bytes > half / 4)
        s->gmax /= 2;
    s->stats.group_max = s->gmax;
    s->coef_cap = (size_t)8 << 20;
    s->plans_off = 0;
    s->coef_off = ALIGN((size_t)s->gmax * sizeof(sl__gpu_plan_t));
    s->out_off = ALIGN(s->coef_off + s->coef_cap + sizeof s->lut);
    s->arena_off = ALIGN(s->out_off + (size_t)s->gmax * s->sample_bytes);
    if (s->arena_off + ((size_t)32 << 20) > half)
        return sl__fail(err, errlen, SL_EINVAL,
                        "GPU stage: a budget of %zu MiB leaves no room to "
                        "decode (samples of %zu bytes)",
                        budget >> 20, s->sample_bytes);
    s->arena_cap = half - s->arena_off;
    s->slot_bytes = half;
    /* Host side: where the device has its arena, the group's bitstreams
     * (32 MiB: ~300 ImageNet photos; more waits for the next group). */
    s->bits_off = s->arena_off;
    s->bits_cap = (size_t)32 << 20;
    return 0;
}

static sl__gpu_stage_t *create_on(const sl__gpu_rt_t *rt, const sl__xform_t *x,
                                  size_t sample_bytes, int device,
                                  size_t budget, char *err, size_t errlen);

sl__gpu_stage_t *sl__cuda_stage_create(const sl__xform_t *x,
                                       size_t sample_bytes, int device,
                                       size_t budget, char *err, size_t errlen)
{
    if (!sl__gpu_kernels_built()) {
        sl__fail(err, errlen, SL_EUNSUPPORTED,
                 "the GPU stage is not in this build (no CUDA kernels "
                 "compiled)");
        return NULL;
    }
    sl__gpu_status_t gs;
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(&gs);
    if (!rt) {
        sl__fail(err, errlen, SL_EUNSUPPORTED, "GPU stage: %s", gs.reason);
        return NULL;
    }
    if (device < 0 || device >= gs.device_count) {
        sl__fail(err, errlen, SL_EINVAL,
                 "GPU stage: gpu_device %d: this machine has %d CUDA "
                 "device%s",
                 device, gs.device_count, gs.device_count == 1 ? "" : "s");
        return NULL;
    }
    int was = sl__gpu_rt_caller_device(rt);
    sl__gpu_stage_t *st =
        create_on(rt, x, sample_bytes, device, budget, err, errlen);
    sl__gpu_rt_caller_back(rt, device, was);
    return st;
}

/* The stage on `device` (the runtime checked), made on the caller's
 * thread, whose device it sets. */
static sl__gpu_stage_t *create_on(const sl__gpu_rt_t *rt, const sl__xform_t *x,
                                  size_t sample_bytes, int device,
                                  size_t budget, char *err, size_t errlen)
{
    cstage_t *s = calloc(1, sizeof *s);
    if (!s) {
        sl__fail(err, errlen, SL_ENOMEM, "GPU stage: out of memory");
        return NULL;
    }
    s->ops = (sl__gpu_stage_t){.submit = cs_submit,
                               .drain = cs_drain,
                               .destroy = cs_destroy,
                               .dev_alloc = cs_dev_alloc,
                               .dev_release = cs_dev_release,
                               .dev_free = cs_dev_free,
                               .copy = cs_copy};
    s->rt = rt;
    s->x = *x;
    s->sample_bytes = sample_bytes;
    s->device = device;
    pthread_mutex_init(&s->mu, NULL);
    sl__devbufs_init(&s->bufs, rt, device);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_slot, NULL);
    pthread_cond_init(&s->cv_idle, NULL);
    sl__norm_lut(x->mean, x->std, s->lut);
    s->scratch = sl__scratch_create();
    if (!s->scratch) {
        sl__fail(err, errlen, SL_ENOMEM, "GPU stage: out of memory");
        release(s);
        return NULL;
    }
    if (size_slots(s, budget ? budget : SL__GPU_BUDGET_DEFAULT, err, errlen)) {
        release(s);
        return NULL;
    }
    sl__cuda_err_t e = rt->set_device(device);
    const char *what = "cudaSetDevice";
    if (!e && rt->device_pci_bus_id &&
        rt->device_pci_bus_id(s->stats.pci_bus_id,
                              (int)sizeof s->stats.pci_bus_id, device))
        s->stats.pci_bus_id[0] = 0; /* telemetry reads GPU 0 */
    s->stats.pci_bus_id[sizeof s->stats.pci_bus_id - 1] = 0;
    for (int k = 0; k < 2 && !e; k++) {
        slot_t *sl = &s->slot[k];
        what = "allocating its memory";
        e = rt->host_malloc((void **)&sl->h, s->bits_off + s->bits_cap);
        if (!e) {
            s->stats.host_bytes += s->bits_off + s->bits_cap;
            e = rt->dev_malloc((void **)&sl->d, s->slot_bytes);
        }
        if (!e)
            s->stats.dev_bytes += s->slot_bytes;
        if (!e) {
            what = "a stream";
            e = rt->stream_create(&sl->stream, 1 /* non-blocking */);
        }
        if (!e)
            e = rt->event_create(&sl->done_ev, 3 /* blocking, no timing */);
        if (!e && k == 1) {
            what = "a stream";
            e = sl__devbufs_open(&s->bufs);
        }
        if (!e) /* the table once per slot, from its own pinned copy */
            memcpy(sl->h + s->coef_off + s->coef_cap, s->lut, sizeof s->lut);
        if (!e)
            e = rt->memcpy_async(sl->d + s->coef_off + s->coef_cap,
                                 sl->h + s->coef_off + s->coef_cap,
                                 sizeof s->lut, SL__H2D, sl->stream);
        if (!e)
            e = rt->stream_synchronize(sl->stream);
    }
    if (e) {
        sl__fail(err, errlen, SL_ESYSTEM, "GPU stage: %s: %s", what,
                 cuda_why(s, e));
        release(s);
        return NULL;
    }
    /* After the allocations: the device's context is made, which the
     * driver's module API loads into. */
    char kwhy[160];
    double t0 = now_s();
    if (sl__gpu_kernels_load(&s->kern, rt, kwhy, sizeof kwhy) ||
        kernels_warm(s, kwhy, sizeof kwhy)) {
        sl__fail(err, errlen, SL_ESYSTEM, "GPU stage: loading the kernels: %s",
                 kwhy);
        release(s);
        return NULL;
    }
    s->stats.load_s = now_s() - t0;
    /* SL_GPU_PAGEABLE_BITS=1 hands nvJPEG the bitstreams where they are,
     * SL_GPU_NVJPEG_ALLOC=default leaves its allocations to CUDA, not the
     * cache (gpu/nvalloc.h): both for measuring the difference
     * (bench/gpu/train.py's cases) */
    s->pageable_bits = env_is("SL_GPU_PAGEABLE_BITS", "1");
    int cached = !env_is("SL_GPU_NVJPEG_ALLOC", "default");
    sl__nvalloc_join();
    s->counted = 1;
    /* The hardware backend where this GPU has the engines (NVJPG: A100,
     * H100, H200), else the default one (GPU / hybrid); learnt here, on
     * the stage's device (gpu/rt.h makes no handle). SL_GPU_BACKEND=
     * default: the default backend where the hardware one is there too
     * (for measuring which of them slows the training step: bench/gpu) */
    int hw = !env_is("SL_GPU_BACKEND", "default");
    int je = 0;
    for (int k = 0; k < 2; k++) { /* hardware, or where it fails default */
        int backend =
            hw ? SL__NVJPEG_BACKEND_HARDWARE : SL__NVJPEG_BACKEND_DEFAULT;
        je = cached ? rt->nvjpeg_create_ex_v2(backend, sl__nvalloc_dev(),
                                              sl__nvalloc_pinned(), 0, &s->jh)
                    : rt->nvjpeg_create_ex(backend, NULL, NULL, 0, &s->jh);
        if (!je || !hw)
            break;
        hw = 0; /* this GPU has no engines */
    }
    s->stats.hw_backend = hw;
    for (int k = 0; k < 2 && !je; k++)
        je = rt->nvjpeg_state_create(s->jh, &s->slot[k].jstate);
    /* ROI decode: the hardware backend's batched decode with a region per
     * image, where the library has it; SL_GPU_ROI=0 decodes whole images
     * (for measuring the difference: bench/gpu). Its parameter sets are
     * made here, the regions set per group. */
    s->roi = !je && hw && sl__gpu_rt_roi(rt) && !env_is("SL_GPU_ROI", "0");
    int pe = 0; /* a failure here only turns the option off */
    for (int k = 0; k < 2 && s->roi && !pe; k++)
        for (int i = 0; i < s->gmax && !pe; i++) {
            pe = rt->nvjpeg_params_create(s->jh, &s->slot[k].params[i]);
            if (!pe)
                pe = rt->nvjpeg_params_set_format(s->slot[k].params[i],
                                                  SL__NVJPEG_OUTPUT_RGBI);
        }
    if (pe) {
        s->roi = 0;
        s->stats.roi_off = pe;
    }
    s->stats.roi = s->roi;
    if (!je && hw)
        hw_setup(s);
    if (je) {
        sl__fail(err, errlen, SL_ESYSTEM, "GPU stage: nvJPEG: status %d", je);
        release(s);
        return NULL;
    }
    if (pthread_create(&s->feeder, NULL, feeder_main, s) == 0)
        s->threads = 1;
    if (s->threads == 1 &&
        pthread_create(&s->completer, NULL, completer_main, s) == 0)
        s->threads = 2;
    if (s->threads < 2) {
        sl__fail(err, errlen, SL_ESYSTEM, "GPU stage: cannot start threads");
        cs_destroy(&s->ops);
        return NULL;
    }
    return &s->ops;
}
