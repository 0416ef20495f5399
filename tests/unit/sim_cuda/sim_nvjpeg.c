/* nvJPEG simulated on the CPU (libnvjpeg.so.13 in the test tree; see
 * sim_cudart.c): the batched decode is libjpeg-turbo's full decode to
 * interleaved RGB with its defaults (islow IDCT, fancy upsampling) — the
 * CPU path's pixels — into each image's channel[0]. A JPEG libjpeg fails
 * on fails the whole batch with NVJPEG_STATUS_BAD_JPEG, as nvJPEG does. */
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
    unsigned char *channel[4];
    size_t pitch[4];
} sim_image;

static char handle_token;

typedef struct {
    int n; /* the batch size initialised */
} sim_state;

int nvjpegCreateEx(int backend, void *da, void *pa, unsigned f, void **h)
{
    (void)backend, (void)da, (void)pa, (void)f;
    *h = &handle_token;
    return 0;
}
int nvjpegDestroy(void *h)
{
    (void)h;
    return 0;
}
int nvjpegJpegStateCreate(void *h, void **st)
{
    (void)h;
    *st = calloc(1, sizeof(sim_state));
    return *st ? 0 : 5;
}
int nvjpegJpegStateDestroy(void *st)
{
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

static int decode(const unsigned char *p, size_t n, sim_image *out)
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
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = out->channel[0] + out->pitch[0] * d.output_scanline;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return 0;
}

int nvjpegDecodeBatched(void *h, void *st, const unsigned char *const *d,
                        const size_t *lens, void *outputs, void *stream)
{
    (void)h, (void)stream;
    sim_image *img = outputs;
    for (int i = 0; i < ((sim_state *)st)->n; i++) {
        int rc = decode(d[i], lens[i], &img[i]);
        if (rc)
            return rc;
    }
    return 0;
}
