/* ops/transform: the entry points. Sniffs the format, checks the request,
 * hands off to the JPEG or PNG back end; and the public sl_image_* wrappers,
 * which keep one scratch per calling thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "ops/ops_internal.h"

/* The first versioned layout of sl_transform_t (base/abi.h). */
#define SL__TRANSFORM_V1_SIZE (offsetof(sl_transform_t, strict) + sizeof(int))

sl__scratch_t *sl__scratch_create(void)
{
    return calloc(1, sizeof(sl__scratch_t));
}

void sl__scratch_destroy(sl__scratch_t *s)
{
    if (!s)
        return;
    sl__jpeg_release(s);
    sl__bytes_free(&s->rows);
    sl__bytes_free(&s->tmp);
    sl__bytes_free(&s->coef);
    sl__bytes_free(&s->dbl);
    sl__bytes_free(&s->line);
    sl__bytes_free(&s->full);
    free(s);
}

void sl__scratch_set_admit(sl__scratch_t *s, const sl__admit_t *admit)
{
    s->admit = admit;
}

int sl__scratch_admit(sl__scratch_t *s, size_t need, char *err, size_t errlen)
{
    return sl__admit(s->admit, (int64_t)need, err, errlen);
}

void sl__scratch_trim(sl__scratch_t *s, size_t keep)
{
    sl__bytes_t *v[] = {&s->rows, &s->tmp,  &s->coef,
                        &s->dbl,  &s->line, &s->full};
    size_t n = sizeof v / sizeof *v, held = 0;
    for (size_t i = 0; i < n; i++)
        held += v[i]->cap;
    if (held > keep)
        for (size_t i = 0; i < n; i++)
            sl__bytes_free(v[i]);
}

int sl__check_dims(int w, int h, char *err, size_t errlen)
{
    if (w <= 0 || h <= 0 || w > SL__IMG_MAX_SIDE || h > SL__IMG_MAX_SIDE ||
        (int64_t)w * h > SL__IMG_MAX_PIXELS)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "image of %dx%d pixels not supported (max %d per "
                        "side, %lld pixels)",
                        w, h, SL__IMG_MAX_SIDE, (long long)SL__IMG_MAX_PIXELS);
    return 0;
}

static int is_jpeg(const uint8_t *p, size_t n)
{
    return n >= 2 && p[0] == 0xFF && p[1] == 0xD8;
}

static int is_png(const uint8_t *p, size_t n)
{
    return n >= 8 && p[0] == 0x89 && p[1] == 'P' && p[2] == 'N' && p[3] == 'G';
}

int sl__image_info(const uint8_t *bytes, size_t n, int *w, int *h, char *err,
                   size_t errlen)
{
    if (!bytes || !w || !h)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    if (is_jpeg(bytes, n))
        return sl__jpeg_info(bytes, n, w, h, err, errlen);
    if (is_png(bytes, n))
        return sl__png_info(bytes, n, w, h, err, errlen);
    if (n == 0)
        return sl__fail(err, errlen, SL_EDECODE, "empty input");
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "not a JPEG or PNG");
}

int sl__image_geometry(const uint8_t *bytes, size_t n, const sl__xform_t *x,
                       sl__rng_t *crop_rng, sl__rng_t *flip_rng, double box[4],
                       int *flip, char *err, size_t errlen)
{
    int W, H;
    int rc = sl__image_info(bytes, n, &W, &H, err, errlen);
    if (rc)
        return rc;
    sl__geom_t g;
    rc = sl__geom_resolve(x, W, H, crop_rng, flip_rng, &g, err, errlen);
    if (rc)
        return rc;
    box[0] = g.box.x0, box[1] = g.box.y0, box[2] = g.box.x1, box[3] = g.box.y1;
    *flip = g.flip;
    return 0;
}

static int check_xform(const sl__xform_t *x, char *err, size_t errlen)
{
    if (x->out_w < 1 || x->out_h < 1 || x->out_w > SL__OUT_MAX_SIDE ||
        x->out_h > SL__OUT_MAX_SIDE)
        return sl__fail(err, errlen, SL_EINVAL, "bad output size %dx%d",
                        x->out_w, x->out_h);
    if ((x->dtype != SL_DTYPE_UINT8 && x->dtype != SL_DTYPE_FLOAT32) ||
        (x->layout != SL_LAYOUT_CHW && x->layout != SL_LAYOUT_HWC))
        return sl__fail(err, errlen, SL_EINVAL, "bad dtype %d or layout %d",
                        x->dtype, x->layout);
    if (x->mode == SL_XF_RRC &&
        !(x->scale[0] > 0 && x->scale[0] <= x->scale[1] && x->ratio[0] > 0 &&
          x->ratio[0] <= x->ratio[1]))
        return sl__fail(err, errlen, SL_EINVAL, "bad RRC scale or ratio");
    if (x->dtype == SL_DTYPE_FLOAT32 &&
        (x->std[0] == 0 || x->std[1] == 0 || x->std[2] == 0))
        return sl__fail(err, errlen, SL_EINVAL, "zero std");
    return 0;
}

int sl__image_process(const uint8_t *bytes, size_t n, const sl__xform_t *x,
                      sl__rng_t *crop_rng, sl__rng_t *flip_rng,
                      sl__scratch_t *s, void *out, char *err, size_t errlen)
{
    if (!bytes || !x || !s || !out)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    int rc = check_xform(x, err, errlen);
    if (rc)
        return rc;
    if (is_jpeg(bytes, n))
        rc = sl__jpeg_process(bytes, n, x, crop_rng, flip_rng, s, out, err,
                              errlen);
    else if (is_png(bytes, n))
        rc = sl__png_process(bytes, n, x, crop_rng, flip_rng, s, out, err,
                             errlen);
    else if (n == 0)
        return sl__fail(err, errlen, SL_EDECODE, "empty input");
    else
        return sl__fail(err, errlen, SL_EUNSUPPORTED, "not a JPEG or PNG");
    sl__scratch_trim(s, SL__SCRATCH_KEEP); /* an outlier's buffers go */
    return rc;
}

/* ----------------------------------------------------------- public API */

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
    sl__scratch_destroy(p);
}

static void tls_init(void)
{
    pthread_key_create(&tls_key, tls_free);
}

/* This thread's scratch, made on first use, freed when the thread exits. */
static sl__scratch_t *tls_scratch(void)
{
    pthread_once(&tls_once, tls_init);
    sl__scratch_t *s = pthread_getspecific(tls_key);
    if (!s) {
        s = sl__scratch_create();
        if (s && pthread_setspecific(tls_key, s)) {
            sl__scratch_destroy(s);
            s = NULL;
        }
    }
    return s;
}

SL_API int sl_image_info(const void *bytes, size_t len, int *width, int *height)
{
    return sl__image_info(bytes, len, width, height, NULL, 0);
}

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

SL__ABI_INIT_PAIR(sl_transform_init, sl_transform_t)

SL_API int sl_image_transform(const void *bytes, size_t len,
                              const sl_transform_t *tp, void *out, char *err,
                              size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!tp)
        return sl__fail(err, errlen, SL_EINVAL, "NULL transform");
    sl_transform_t tr;
    int rc = sl__abi_in(&tr, sizeof tr, tp, SL__TRANSFORM_V1_SIZE,
                        "sl_transform", err, errlen);
    if (rc)
        return rc;
    const sl_transform_t *t = &tr;
    sl__xform_t x;
    memset(&x, 0, sizeof x);
    x.mode = SL_XF_BOX;
    x.box = (sl__crop_t){t->crop_x, t->crop_y, t->crop_w, t->crop_h};
    x.flip = t->flip != 0;
    x.out_w = t->out_w;
    x.out_h = t->out_h;
    x.dtype = t->dtype;
    x.layout = t->layout;
    int mean_zero = !t->mean[0] && !t->mean[1] && !t->mean[2];
    int std_zero = !t->std[0] && !t->std[1] && !t->std[2];
    memcpy(x.mean, mean_zero ? imagenet_mean : t->mean, sizeof x.mean);
    memcpy(x.std, std_zero ? imagenet_std : t->std, sizeof x.std);
    x.dct_scale = !t->no_dct_scale;
    x.strict = t->strict != 0;
    sl__scratch_t *s = tls_scratch();
    if (!s)
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for scratch");
    return sl__image_process(bytes, len, &x, NULL, NULL, s, out, err, errlen);
}
