/* volume/voxels: stored values into a volume's data, by a plan (see
 * vol_internal.h): scale, cast, and place, in one pass per piece. */
#include <string.h>

#include "vol_internal.h"

/* One run of stored values along the first axis: n values from `in`,
 * written every `step` elements of `out` from `o`. Stored values are read
 * with memcpy: they need not be aligned (a volume record's data starts
 * where its header ends); the compiler makes it a plain load. */
#define RUN_FLOAT(T)                                                           \
    do {                                                                       \
        const unsigned char *s = in;                                           \
        float *d = (float *)out + o;                                           \
        T x;                                                                   \
        if (p->scale)                                                          \
            for (int64_t k = 0; k < n; k++) {                                  \
                memcpy(&x, s + k * (int64_t)sizeof x, sizeof x);               \
                d[k * step] = (float)((double)x * p->slope + p->inter);        \
            }                                                                  \
        else                                                                   \
            for (int64_t k = 0; k < n; k++) {                                  \
                memcpy(&x, s + k * (int64_t)sizeof x, sizeof x);               \
                d[k * step] = (float)x;                                        \
            }                                                                  \
    } while (0)

#define RUN_SAME(T)                                                            \
    do {                                                                       \
        const unsigned char *s = in;                                           \
        T *d = (T *)out + o;                                                   \
        for (int64_t k = 0; k < n; k++)                                        \
            memcpy(&d[k * step], s + k * (int64_t)sizeof(T), sizeof(T));       \
    } while (0)

static void run(const sl__vol_plan_t *p, const void *in, int64_t n, void *out,
                int64_t o, int64_t step)
{
    if (p->out_dtype == SL_VOLUME_FLOAT32 &&
        (p->in_dtype != SL_VOLUME_FLOAT32 || p->scale)) {
        switch (p->in_dtype) {
        case SL_VOLUME_UINT8:
            RUN_FLOAT(uint8_t);
            break;
        case SL_VOLUME_INT16:
            RUN_FLOAT(int16_t);
            break;
        case SL_VOLUME_INT32:
            RUN_FLOAT(int32_t);
            break;
        case SL_VOLUME_FLOAT32:
            RUN_FLOAT(float);
            break;
        case SL_VOLUME_FLOAT64:
            RUN_FLOAT(double);
            break;
        case SL_VOLUME_INT8:
            RUN_FLOAT(int8_t);
            break;
        case SL_VOLUME_UINT16:
            RUN_FLOAT(uint16_t);
            break;
        case SL_VOLUME_UINT32:
            RUN_FLOAT(uint32_t);
            break;
        }
        return;
    }
    size_t sz = sl_volume_dtype_size(p->in_dtype);
    if (step == 1) {
        memcpy((char *)out + o * (int64_t)sz, in, (size_t)n * sz);
        return;
    }
    switch (sz) {
    case 1:
        RUN_SAME(uint8_t);
        break;
    case 2:
        RUN_SAME(uint16_t);
        break;
    case 4:
        RUN_SAME(uint32_t);
        break;
    case 8:
        RUN_SAME(uint64_t);
        break;
    }
}

void sl__vol_convert(const sl__vol_plan_t *p, const void *raw, int64_t first,
                     int64_t count, void *out)
{
    size_t sz = sl_volume_dtype_size(p->in_dtype);
    const char *in = raw;
    int64_t c[4], e = first;
    for (int i = 0; i < 4; i++) {
        c[i] = e % p->in_dim[i];
        e /= p->in_dim[i];
    }
    while (count > 0) {
        int64_t n = p->in_dim[0] - c[0];
        if (n > count)
            n = count;
        int64_t o = p->start;
        for (int i = 0; i < 4; i++)
            o += c[i] * p->stride[i];
        run(p, in, n, out, o, p->stride[0]);
        in += n * (int64_t)sz;
        count -= n;
        c[0] += n;
        for (int i = 0; i < 3 && c[i] == p->in_dim[i]; i++) {
            c[i] = 0;
            c[i + 1]++;
        }
    }
}
