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
 * (sim_nvjpeg_wrong_device, for tests: dlsym). */
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
} sim_state;

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

static void on_device(int made_on)
{
    if (cur_device() != made_on)
        atomic_fetch_add(&wrong_device, 1);
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
    (void)h;
    sim_state *ss = calloc(1, sizeof(sim_state));
    if (ss)
        ss->device = cur_device();
    *st = ss;
    return *st ? 0 : 5;
}
int nvjpegJpegStateDestroy(void *st)
{
    on_device(((sim_state *)st)->device);
    free(st);
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
    if (n <= 0 || fmt != 5) /* RGBI only */
        return 2;
    ((sim_state *)st)->n = n;
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
 * copied: the CPU's pixels of that region). */
static int decode(const unsigned char *p, size_t n, sim_image *out,
                  const sim_params *roi)
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

int nvjpegDecodeBatched(void *h, void *st, const unsigned char *const *d,
                        const size_t *lens, void *outputs, void *stream)
{
    int forced = forced_failure();
    if (forced)
        return forced;
    int bad = stage_bits(h, ((sim_state *)st)->n, d, lens, stream);
    if (bad)
        return bad;
    sim_image *img = outputs;
    for (int i = 0; i < ((sim_state *)st)->n; i++) {
        int rc = decode(d[i], lens[i], &img[i], NULL);
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
    int forced = forced_failure();
    if (forced)
        return forced;
    int bad = stage_bits(h, ((sim_state *)st)->n, d, lens, stream);
    if (bad)
        return bad;
    sim_image *img = outputs;
    for (int i = 0; i < ((sim_state *)st)->n; i++) {
        int rc = decode(d[i], lens[i], &img[i], params[i]);
        if (rc)
            return rc;
    }
    return 0;
}
