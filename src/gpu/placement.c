/* gpu/placement: the placement option's rule and the slot routing (see
 * placement.h). */
#include "gpu/placement.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"

/* The GPU stage's kernels are compiled in where nvcc was found
 * (cmake/GpuKernels.cmake); without them a GPU is never used, and
 * placement gpu says so. */
#ifndef SL_HAVE_GPU_STAGE
#define SL_HAVE_GPU_STAGE 0
#endif
#define STAGE_MISSING                                                          \
    "the GPU stage is not in this build (no CUDA kernels compiled)"

static const char *const names[] = {"auto", "cpu", "gpu"};

const char *sl__placement_name(int placement)
{
    return placement >= SL_PLACEMENT_AUTO && placement <= SL_PLACEMENT_GPU
               ? names[placement]
               : NULL;
}

int sl__placement_parse(const char *name)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int sl__placement_decide(int asked, int stage_built, const sl__gpu_status_t *st,
                         sl__placement_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (!sl__placement_name(asked))
        return sl__fail(err, errlen, SL_EINVAL,
                        "unknown placement %d (auto, cpu or gpu)", asked);
    p->asked = asked;
    if (asked == SL_PLACEMENT_CPU)
        return 0;
    if (st && !st->available)
        snprintf(p->why, sizeof p->why, "%s%s",
                 stage_built ? "" : STAGE_MISSING "; CUDA: ", st->reason);
    else if (!stage_built)
        snprintf(p->why, sizeof p->why, "%s", STAGE_MISSING);
    else if (!st)
        snprintf(p->why, sizeof p->why, "the CUDA runtime was not probed");
    else
        p->gpu = 1;
    if (!p->gpu && asked == SL_PLACEMENT_GPU)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "placement gpu: no GPU stage: %s", p->why);
    return 0;
}

int sl__placement_resolve(int asked, int share_asked, int places, int gpus,
                          sl__placement_t *p, char *err, size_t errlen)
{
    if (asked == SL_PLACEMENT_AUTO && !share_asked && !(places && gpus > 0)) {
        memset(p, 0, sizeof *p);
        p->asked = asked;
        snprintf(p->why, sizeof p->why, "%s",
                 places ? "auto: no GPU seen (NVML)"
                        : "auto without a gpu_share under the static "
                          "policy: the CPU (no policy places samples)");
        return 0;
    }
    sl__gpu_status_t st;
    const sl__gpu_status_t *stp = NULL;
    /* auto probes only when the stage could run; gpu always, so its
     * error names what the runtime found too. */
    if (asked == SL_PLACEMENT_GPU ||
        (asked == SL_PLACEMENT_AUTO && SL_HAVE_GPU_STAGE)) {
        sl__gpu_rt_get(&st);
        stp = &st;
    }
    return sl__placement_decide(asked, SL_HAVE_GPU_STAGE, stp, p, err, errlen);
}

int sl__gpu_route_count(int n, int share)
{
    if (n <= 0 || share <= 0)
        return 0;
    if (share >= SL__GPU_SHARE_MAX)
        return n;
    /* round half up, in integers: the same count on every machine */
    return (int)(((long long)n * share * 2 + SL__GPU_SHARE_MAX) /
                 (2 * SL__GPU_SHARE_MAX));
}

int sl__gpu_route_share(int n, int c)
{
    if (c <= 0 || n <= 0)
        return 0;
    if (c > n)
        return SL__GPU_SHARE_MAX;
    /* round(n x / 1000) >= c: x >= 1000 (2c - 1) / 2n, rounded up */
    long long x =
        ((long long)SL__GPU_SHARE_MAX * (2 * c - 1) + 2LL * n - 1) / (2LL * n);
    return x < SL__GPU_SHARE_MAX ? (int)x : SL__GPU_SHARE_MAX;
}

int sl__gpu_route(int slot, int n, int share)
{
    return slot >= 0 && slot < sl__gpu_route_count(n, share);
}
