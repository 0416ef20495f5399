/* ops/jpeg_encode: baseline JPEG from RGB into memory (make-dataset, tests).
 * Default libjpeg settings: 4:2:0, ISLOW DCT, standard tables. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

typedef struct enc_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} enc_err_t;

static void enc_on_error(j_common_ptr c)
{
    enc_err_t *e = (enc_err_t *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

static void enc_on_output(j_common_ptr c)
{
    (void)c;
}

/* Everything libjpeg touches after setjmp lives in this struct, so nothing
 * is a local that longjmp could leave stale. */
typedef struct enc_state {
    struct jpeg_compress_struct c;
    enc_err_t e;
    unsigned char *buf;
    unsigned long len;
} enc_state_t;

static void enc_body(enc_state_t *st, const uint8_t *rgb, int w, int h,
                     int quality)
{
    struct jpeg_compress_struct *c = &st->c;
    jpeg_mem_dest(c, &st->buf, &st->len);
    c->image_width = (JDIMENSION)w;
    c->image_height = (JDIMENSION)h;
    c->input_components = 3;
    c->in_color_space = JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, quality, TRUE);
    jpeg_start_compress(c, TRUE);
    while (c->next_scanline < c->image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c->next_scanline * w * 3);
        jpeg_write_scanlines(c, &row, 1);
    }
    jpeg_finish_compress(c);
}

int sl__jpeg_encode(const uint8_t *rgb, int w, int h, int quality,
                    sl__bytes_t *out, char *err, size_t errlen)
{
    if (!rgb || !out || w < 1 || h < 1 || w > 65500 || h > 65500)
        return sl__fail(err, errlen, SL_EINVAL, "bad image to encode");
    enc_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return sl__fail(err, errlen, SL_ENOMEM, "no memory");
    st->c.err = jpeg_std_error(&st->e.pub);
    st->e.pub.error_exit = enc_on_error;
    st->e.pub.output_message = enc_on_output;
    int rc = 0;
    if (setjmp(st->e.jb)) {
        rc = sl__fail(err, errlen, SL_EIO, "JPEG encode: %s", st->e.msg);
    } else {
        jpeg_create_compress(&st->c);
        enc_body(st, rgb, w, h, quality);
        if (sl__bytes_reserve(out, st->len))
            rc = sl__fail(err, errlen, SL_ENOMEM, "no memory");
        else {
            memcpy(out->p, st->buf, st->len);
            out->n = st->len;
        }
    }
    jpeg_destroy_compress(&st->c);
    free(st->buf);
    free(st);
    return rc;
}
