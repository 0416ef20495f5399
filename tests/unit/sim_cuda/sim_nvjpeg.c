/* nvJPEG simulated on the CPU (libnvjpeg.so.13 in the test tree; see
 * sim_cudart.c): the batched decode is libjpeg-turbo's full decode to
 * interleaved RGB with its defaults (islow IDCT, fancy upsampling) — the
 * CPU path's pixels — into each image's channel[0]. A JPEG libjpeg fails
 * on fails the whole batch with NVJPEG_STATUS_BAD_JPEG, as nvJPEG does.
 *
 * The ROI decode (nvjpegDecodeBatchedEx with per-image parameters) writes
 * each image's region of that full decode at its pitch; as in nvJPEG it is
 * the hardware backend's only (another handle gets
 * NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED); SIM_NVJPEG_NO_ROI=1 makes
 * the decode unsupported everywhere (a library or GPU without it), =set
 * makes setting a region fail (NVJPEG_STATUS_INVALID_PARAMETER), =create
 * making a parameter set. SIM_NVJPEG_FAIL=N fails every batched decode
 * with status N (an image nvJPEG does not support: 4).
 *
 * Handles and states are bound to the device current at their making, as
 * nvJPEG's guide says; one used or destroyed on another is counted
 * (sim_nvjpeg_wrong_device, for tests: dlsym).
 *
 * The hardware backend, for the stage's use of it (tests: dlsym the
 * sim_nvjpeg_* counters):
 * - A JPEG holding a comment (COM segment) "sim:hw-unsupported" is one the
 *   hardware decoder does not take: nvjpegDecodeBatchedSupportedEx says so
 *   (after nvjpegJpegStreamParseHeader), and a batched decode with it on a
 *   hardware handle fails as a whole (NVJPEG_STATUS_JPEG_NOT_SUPPORTED);
 *   the default backend decodes it. Checks counted (sim_nvjpeg_checks).
 * - A state's buffers are sized for a batch and an image size, grown when
 *   a batch is initialised for more images or decodes a larger one
 *   (sim_nvjpeg_grows), unless nvjpegDecodeBatchedPreAllocate sized them
 *   for it first (sim_nvjpeg_prealloc: the calls and the last one's
 *   arguments). Their memory is a small pinned block through the handle's
 *   allocator, taken and given back with no stream (as Initialize and
 *   JpegStateDestroy have none).
 * - Such stream-less calls (Initialize, JpegStateDestroy) made while the
 *   state's last decode stream has work the host has not seen finish
 *   (the simulated runtime's sim_cuda_stream_idle) are counted
 *   (sim_nvjpeg_busy): on a GPU they would free or resize buffers that
 *   work may still read. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
    unsigned char *channel[4];
    size_t pitch[4];
} sim_image;

/* nvjpegDevAllocatorV2_t / nvjpegPinnedAllocatorV2_t */
typedef struct {
    int (*m)(void *ctx, void **p, size_t n, void *stream);
    int (*f)(void *ctx, void *p, size_t n, void *stream);
    void *ctx;
} sim_alloc_v2;

typedef struct {
    int backend;
    int device;
    sim_alloc_v2 dev, pin; /* m NULL: none given */
} sim_handle;

typedef struct {
    int n; /* the batch size initialised */
    int device;
    sim_handle *h;
    void *stream;      /* the last decode's */
    int cap_n, cap_px; /* what its buffers hold: images, pixels each */
    void *buf;         /* their memory (the pinned allocator's) */
    size_t buf_n;
} sim_state;

static atomic_int grows, busy, checks, preallocs;
static int pre_args[4]; /* the last PreAllocate's batch, w, h, css */

int sim_nvjpeg_grows(void)
{
    return atomic_load(&grows);
}
int sim_nvjpeg_busy(void)
{
    return atomic_load(&busy);
}
int sim_nvjpeg_checks(void)
{
    return atomic_load(&checks);
}
int sim_nvjpeg_prealloc(int *batch, int *w, int *h, int *css)
{
    *batch = pre_args[0], *w = pre_args[1], *h = pre_args[2];
    *css = pre_args[3];
    return atomic_load(&preallocs);
}

/* The calling thread's device, from the simulated runtime loaded beside. */
static int cur_device(void)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
    int (*get)(int *) = h ? (int (*)(int *))dlsym(h, "cudaGetDevice") : NULL;
    int d = 0;
    if (get)
        get(&d);
    if (h)
        dlclose(h);
    return d;
}

static atomic_int wrong_device;

int sim_nvjpeg_wrong_device(void)
{
    return atomic_load(&wrong_device);
}

/* For tests (dlsym): handles made on device d, ever (SIM_CUDA_DEVICES
 * is at most 8 in the tests). On a GPU a handle makes and keeps the
 * device's context: one on a device the job does not use costs memory
 * there in every process. */
static atomic_int handles_on[8];

int sim_nvjpeg_handles_on(int d)
{
    return d >= 0 && d < 8 ? atomic_load(&handles_on[d]) : 0;
}

static void on_device(int made_on)
{
    if (cur_device() != made_on)
        atomic_fetch_add(&wrong_device, 1);
}

/* The simulated runtime's entry `name` (its stream bookkeeping). */
static void *cudart_sym(const char *name)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
    void *f = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h); /* still loaded: the stage's */
    return f;
}
static void stream_op(void *s)
{
    void (*op)(void *) = (void (*)(void *))cudart_sym("sim_cuda_stream_op");
    if (op)
        op(s);
}
/* A stream-less call on state ss: counted if its stream may be busy. */
static void check_idle(const sim_state *ss)
{
    int (*idle)(void *) = (int (*)(void *))cudart_sym("sim_cuda_stream_idle");
    if (ss->stream && idle && !idle(ss->stream))
        atomic_fetch_add(&busy, 1);
}
/* The state's buffers for n images (no stream: see above); 0 or 5. */
static int size_buffers(sim_state *ss, int n)
{
    const sim_alloc_v2 *a = &ss->h->pin;
    size_t want = (size_t)n * 256;
    if (!a->m || want <= ss->buf_n)
        return 0;
    if (ss->buf && a->f(a->ctx, ss->buf, ss->buf_n, NULL))
        return 5;
    ss->buf = NULL, ss->buf_n = 0;
    if (a->m(a->ctx, &ss->buf, want, NULL))
        return 5;
    ss->buf_n = want;
    return 0;
}

typedef struct {
    int x, y, w, h; /* w < 0: the whole image */
    int fmt;
} sim_params;

int nvjpegCreateEx(int backend, void *da, void *pa, unsigned f, void **h)
{
    (void)da, (void)pa, (void)f;
    sim_handle *sh = calloc(1, sizeof *sh);
    if (!sh)
        return 5;
    sh->backend = backend;
    sh->device = cur_device();
    if (sh->device >= 0 && sh->device < 8)
        atomic_fetch_add(&handles_on[sh->device], 1);
    *h = sh;
    return 0;
}
/* With the extended allocators, which each batched decode uses as nvJPEG
 * does: a device buffer and a pinned one for the group's bitstreams, on
 * the decode's stream, given back at its end. */
int nvjpegCreateExV2(int backend, void *da, void *pa, unsigned f, void **h)
{
    int rc = nvjpegCreateEx(backend, NULL, NULL, f, h);
    if (!rc && da)
        ((sim_handle *)*h)->dev = *(const sim_alloc_v2 *)da;
    if (!rc && pa)
        ((sim_handle *)*h)->pin = *(const sim_alloc_v2 *)pa;
    return rc;
}
int nvjpegDestroy(void *h)
{
    on_device(((sim_handle *)h)->device);
    free(h);
    return 0;
}
int nvjpegDecodeParamsCreate(void *h, void **p)
{
    (void)h;
    const char *no = getenv("SIM_NVJPEG_NO_ROI");
    if (no && !strcmp(no, "create"))
        return 9;
    sim_params *sp = calloc(1, sizeof *sp);
    if (!sp)
        return 5;
    sp->w = sp->h = -1;
    sp->fmt = 5;
    *p = sp;
    return 0;
}
int nvjpegDecodeParamsDestroy(void *p)
{
    free(p);
    return 0;
}
int nvjpegDecodeParamsSetOutputFormat(void *p, int fmt)
{
    ((sim_params *)p)->fmt = fmt;
    return 0;
}
int nvjpegDecodeParamsSetROI(void *p, int x, int y, int w, int h)
{
    const char *no = getenv("SIM_NVJPEG_NO_ROI");
    if (x < 0 || (no && !strcmp(no, "set")) || y < 0 || (w != -1 && w <= 0) ||
        (h != -1 && h <= 0))
        return 2;
    sim_params *sp = p;
    sp->x = x, sp->y = y, sp->w = w, sp->h = h;
    return 0;
}
int nvjpegJpegStateCreate(void *h, void **st)
{
    sim_state *ss = calloc(1, sizeof(sim_state));
    if (ss) {
        ss->device = cur_device();
        ss->h = h;
    }
    *st = ss;
    return *st ? 0 : 5;
}
int nvjpegJpegStateDestroy(void *st)
{
    sim_state *ss = st;
    on_device(ss->device);
    check_idle(ss);
    if (ss->buf)
        ss->h->pin.f(ss->h->pin.ctx, ss->buf, ss->buf_n, NULL);
    free(st);
    return 0;
}
int nvjpegDecodeBatchedPreAllocate(void *h, void *st, int n, int w, int hh,
                                   int css, int fmt)
{
    sim_state *ss = st;
    (void)fmt;
    if (((sim_handle *)h)->backend != 3)
        return 9; /* (the simulator's choice: the hardware's buffers) */
    if (n <= 0 || w <= 0 || hh <= 0 || css < 0 || css > 7)
        return 2;
    if (size_buffers(ss, n))
        return 5;
    if (n > ss->cap_n)
        ss->cap_n = n;
    if (w * hh > ss->cap_px)
        ss->cap_px = w * hh;
    pre_args[0] = n, pre_args[1] = w, pre_args[2] = hh, pre_args[3] = css;
    atomic_fetch_add(&preallocs, 1);
    return 0;
}

/* nvjpegJpegStream_t: what the header walk found. */
typedef struct {
    int parsed, hw_unsupported;
} sim_jstream;

int nvjpegJpegStreamCreate(void *h, void **js)
{
    (void)h;
    *js = calloc(1, sizeof(sim_jstream));
    return *js ? 0 : 5;
}
int nvjpegJpegStreamDestroy(void *js)
{
    free(js);
    return 0;
}

/* 1 when the JPEG carries the comment marking it unsupported. */
static int marked(const unsigned char *d, size_t n)
{
    static const char tag[] = "sim:hw-unsupported";
    for (size_t i = 0; i + 4 + sizeof tag - 1 <= n; i++)
        if (d[i] == 0xFF && d[i + 1] == 0xFE &&
            !memcmp(d + i + 4, tag, sizeof tag - 1))
            return 1;
    return 0;
}

int nvjpegJpegStreamParseHeader(void *h, const unsigned char *d, size_t n,
                                void *js)
{
    (void)h;
    sim_jstream *s = js;
    s->parsed = 0;
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return 3; /* NVJPEG_STATUS_BAD_JPEG */
    s->hw_unsupported = marked(d, n);
    s->parsed = 1;
    return 0;
}
int nvjpegDecodeBatchedSupportedEx(void *h, void *js, void *params,
                                   int *supported)
{
    const sim_jstream *s = js;
    (void)params;
    if (!s->parsed)
        return 2;
    atomic_fetch_add(&checks, 1);
    *supported = ((sim_handle *)h)->backend == 3 && s->hw_unsupported;
    return 0;
}
int nvjpegGetImageInfo(void *h, const unsigned char *d, size_t n, int *nc,
                       int *ss, int *w, int *hh)
{
    (void)h, (void)d, (void)n, (void)ss, (void)w, (void)hh;
    *nc = 3;
    return 0;
}
int nvjpegDecodeBatchedInitialize(void *h, void *st, int n, int t, int fmt)
{
    (void)h, (void)t;
    sim_state *ss = st;
    if (n <= 0 || fmt != 5) /* RGBI only */
        return 2;
    check_idle(ss);
    if (n > ss->cap_n) {
        atomic_fetch_add(&grows, 1);
        if (size_buffers(ss, n))
            return 5;
        ss->cap_n = n;
    }
    ss->n = n;
    return 0;
}

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} err_t;

static void on_error(j_common_ptr c)
{
    longjmp(((err_t *)c->err)->jb, 1);
}

/* The whole image into out, or with roi its region (decoded whole, then
 * copied: the CPU's pixels of that region); state ss's buffers grown to
 * its size. */
static int decode(sim_state *ss, const unsigned char *p, size_t n,
                  sim_image *out, const sim_params *roi)
{
    struct jpeg_decompress_struct d;
    err_t e;
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&d);
        return 3;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, p, (unsigned long)n);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_EXT_RGB;
    jpeg_start_decompress(&d);
    int W = (int)d.output_width, H = (int)d.output_height;
    if (W * H > ss->cap_px) {
        atomic_fetch_add(&grows, 1);
        ss->cap_px = W * H;
    }
    int whole = !roi || roi->w < 0;
    if (!whole &&
        (roi->x + roi->w > W || roi->y + roi->h > H || roi->fmt != 5)) {
        jpeg_destroy_decompress(&d);
        return 2; /* a region outside the image */
    }
    unsigned char *row = whole ? NULL : malloc((size_t)W * 3);
    if (!whole && !row) {
        jpeg_destroy_decompress(&d);
        return 5;
    }
    while (d.output_scanline < d.output_height) {
        int y = (int)d.output_scanline;
        JSAMPROW r = whole ? out->channel[0] + out->pitch[0] * y : row;
        jpeg_read_scanlines(&d, &r, 1);
        if (!whole && y >= roi->y && y < roi->y + roi->h)
            memcpy(out->channel[0] + out->pitch[0] * (y - roi->y),
                   row + (size_t)roi->x * 3, (size_t)roi->w * 3);
    }
    free(row);
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return 0;
}

/* SIM_NVJPEG_FAIL's status, or 0. */
static int forced_failure(void)
{
    const char *f = getenv("SIM_NVJPEG_FAIL");
    return f ? atoi(f) : 0;
}

/* The group's bitstreams staged through the handle's allocators (pinned,
 * then device), as nvJPEG stages them; 0, or 5 (ALLOCATOR_FAILURE). */
static int stage_bits(const sim_handle *sh, int n,
                      const unsigned char *const *d, const size_t *lens,
                      void *stream)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i];
    const sim_alloc_v2 *al[2] = {&sh->pin, &sh->dev};
    for (int k = 0; k < 2; k++) {
        void *p = NULL;
        if (!al[k]->m)
            continue;
        if (al[k]->m(al[k]->ctx, &p, total, stream))
            return 5;
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy((unsigned char *)p + at, d[i], lens[i]);
            at += lens[i];
        }
        if (al[k]->f(al[k]->ctx, p, total, stream))
            return 5;
    }
    return 0;
}

/* The checks a batch's decode starts with: its stream noted (work is
 * queued there from now on), a forced failure, an image the hardware
 * backend does not take (the whole batch fails). */
static int batch_start(sim_handle *sh, sim_state *ss,
                       const unsigned char *const *d, const size_t *lens,
                       void *stream)
{
    ss->stream = stream;
    stream_op(stream);
    int forced = forced_failure();
    if (forced)
        return forced;
    for (int i = 0; i < ss->n && sh->backend == 3; i++)
        if (marked(d[i], lens[i]))
            return 4; /* NVJPEG_STATUS_JPEG_NOT_SUPPORTED */
    return 0;
}

int nvjpegDecodeBatched(void *h, void *st, const unsigned char *const *d,
                        const size_t *lens, void *outputs, void *stream)
{
    int forced = batch_start(h, st, d, lens, stream);
    if (forced)
        return forced;
    int bad = stage_bits(h, ((sim_state *)st)->n, d, lens, stream);
    if (bad)
        return bad;
    sim_image *img = outputs;
    for (int i = 0; i < ((sim_state *)st)->n; i++) {
        int rc = decode(st, d[i], lens[i], &img[i], NULL);
        if (rc)
            return rc;
    }
    return 0;
}

int nvjpegDecodeBatchedEx(void *h, void *st, const unsigned char *const *d,
                          const size_t *lens, void *outputs, void **params,
                          void *stream)
{
    const char *no = getenv("SIM_NVJPEG_NO_ROI");
    if (((sim_handle *)h)->backend != 3 || (no && !strcmp(no, "1")))
        return 9; /* NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED */
    int forced = batch_start(h, st, d, lens, stream);
    if (forced)
        return forced;
    int bad = stage_bits(h, ((sim_state *)st)->n, d, lens, stream);
    if (bad)
        return bad;
    sim_image *img = outputs;
    for (int i = 0; i < ((sim_state *)st)->n; i++) {
        int rc = decode(st, d[i], lens[i], &img[i], params[i]);
        if (rc)
            return rc;
    }
    return 0;
}
