/* Fuzz target: any bytes as a label volume for the 3-D U-Net crop draw
 * (sluice/volops.h). The first 6 bytes pick the volume's dims (1..32 per
 * axis) and the patch (1..dim), the rest fill the label (zeros past the
 * end). Nothing may crash or read past the label; the draw must succeed
 * with the crop inside the volume, a foreground class that is present and
 * its component's box inside the volume; the patch is then made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/volops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    int64_t dims[3];
    sl_vol_aug_t a;
    sl_vol_aug_init(&a);
    a.oversampling = 0.9;
    a.noise_prob = 0.5;
    a.brightness_prob = 0.5;
    for (int i = 0; i < 3; i++) {
        dims[i] = 1 + data[i] % 32;
        a.patch[i] = 1 + data[3 + i] % dims[i];
    }
    size_t n = (size_t)(dims[0] * dims[1] * dims[2]);
    uint8_t *label = calloc(n, 1);
    float *image = malloc(n * sizeof *image);
    size_t np = (size_t)(a.patch[0] * a.patch[1] * a.patch[2]);
    float *oi = malloc(np * sizeof *oi);
    uint8_t *ol = malloc(np);
    if (!label || !image || !oi || !ol)
        abort();
    memcpy(label, data + 6, size - 6 < n ? size - 6 : n);
    for (size_t i = 0; i < n; i++)
        image[i] = (float)label[i];
    for (uint64_t sample = 0; sample < 4; sample++) {
        sl_vol_draw_t d;
        char err[256];
        if (sl_vol_draw(label, dims, &a, 9, 0, sample, &d, err, sizeof err))
            abort();
        int present = 0;
        for (size_t i = 0; i < n && d.foreground && !present; i++)
            present = label[i] == d.cls;
        if (d.foreground && (!present || d.cls == 0))
            abort();
        for (int i = 0; i < 3; i++) {
            if (d.lo[i] < 0 || d.lo[i] + a.patch[i] > dims[i])
                abort();
            if (d.foreground && (d.box_lo[i] < 0 || d.box_hi[i] > dims[i] ||
                                 d.box_lo[i] >= d.box_hi[i]))
                abort();
        }
        if (sl_vol_apply(image, label, dims, &a, &d, 9, 0, sample, oi, ol))
            abort();
    }
    free(label);
    free(image);
    free(oi);
    free(ol);
    return 0;
}
