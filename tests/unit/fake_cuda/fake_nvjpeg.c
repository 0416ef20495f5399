/* A stand-in libnvjpeg.so.12 for test_gpu_rt. FAKE_NO_HW: the hardware
 * backend is refused (NVJPEG_STATUS_ARCH_MISMATCH), as on a GPU without
 * NVJPG engines; FAKE_OMIT_BATCHED: nvjpegDecodeBatched is missing. */
#include <stddef.h>

static int fake_handle, handles;

/* For test_gpu_rt (dlsym): handles made (the loader makes none). */
int fake_nvjpeg_handles(void)
{
    return handles;
}

int nvjpegCreateEx(int backend, void *da, void *pa, unsigned f, void **h)
{
    (void)da, (void)pa, (void)f;
    handles++;
#ifdef FAKE_NO_HW
    if (backend == 3)
        return 7;
#else
    (void)backend;
#endif
    *h = &fake_handle;
    return 0;
}
int nvjpegCreateExV2(int backend, void *da, void *pa, unsigned f, void **h)
{
    return nvjpegCreateEx(backend, da, pa, f, h);
}
int nvjpegDestroy(void *h)
{
    return h == &fake_handle ? 0 : 2;
}
int nvjpegJpegStateCreate(void *h, void **st)
{
    (void)h;
    *st = NULL;
    return 0;
}
int nvjpegJpegStateDestroy(void *st)
{
    (void)st;
    return 0;
}
int nvjpegGetImageInfo(void *h, const unsigned char *d, size_t n, int *c,
                       int *ss, int *w, int *ht)
{
    (void)h, (void)d, (void)n, (void)c, (void)ss, (void)w, (void)ht;
    return 3;
}
int nvjpegDecodeBatchedInitialize(void *h, void *st, int b, int t, int f)
{
    (void)h, (void)st, (void)b, (void)t, (void)f;
    return 0;
}
#ifndef FAKE_OMIT_BATCHED
int nvjpegDecodeBatched(void *h, void *st, const unsigned char *const *d,
                        const size_t *n, void *out, void *s)
{
    (void)h, (void)st, (void)d, (void)n, (void)out, (void)s;
    return 0;
}
#endif
