/* libFuzzer target for ops/image: header probe (and the JPEG frame walk
 * the GPU stage reads), then decode + transform in
 * BOX, RRC and CENTER modes, with and without DCT scaling, into a small
 * output. Must never crash, hang or leak on any bytes. Images over 4096 px
 * a side are only probed (their decode cost is real, not a bug). */
#include <stdint.h>
#include <string.h>

#include "ops/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl__scratch_t *s;
    if (!s)
        s = sl__scratch_create();
    int w = 0, h = 0;
    char err[256];
    if (sl__image_info(data, size, &w, &h, err, sizeof err) != 0)
        w = h = 0;
    sl__jpeg_frame_t f;
    if (sl__jpeg_frame(data, size, &f, err, sizeof err) == 0 &&
        (f.w != w || f.h != h))
        __builtin_trap(); /* the frame walk and the probe disagree */
    if (w > 4096 || h > 4096)
        return 0;
    static float out[32 * 32 * 3];
    sl__xform_t x;
    memset(&x, 0, sizeof x);
    x.out_w = x.out_h = 32;
    x.scale[0] = 0.08;
    x.scale[1] = 1.0;
    x.ratio[0] = 0.75;
    x.ratio[1] = 4.0 / 3.0;
    x.flip = 1;
    x.resize_size = 36;
    for (int c = 0; c < 3; c++) {
        x.mean[c] = 0.5f;
        x.std[c] = 0.25f;
    }
    /* One byte of the input picks the box for BOX mode. */
    uint8_t b = size ? data[size / 2] : 0;
    for (int mode = 0; mode < 3; mode++)
        for (int dct = 0; dct < 2; dct++) {
            x.mode = mode;
            x.dct_scale = dct;
            x.dtype = (mode + dct) & 1;
            x.layout = mode == 1;
            x.strict = (b >> 3) & 1;
            x.box.x = w > 1 ? b % (w / 2) : 0;
            x.box.y = h > 1 ? (b >> 4) % (h / 2) : 0;
            x.box.w = w > 1 ? w / 2 : 0;
            x.box.h = h > 1 ? h / 2 : 0;
            sl__rng_t r;
            sl__rng_init(&r, size, 0, b, SL_RNG_CROP);
            sl__image_process(data, size, &x, &r, &r, s, out, err, sizeof err);
        }
    return 0;
}
