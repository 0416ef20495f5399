/* gpu/cuda_stage: the real GPU stage (gpu/stage.h) — nvJPEG batched
 * decode (the hardware JPEG engines where the GPU has them), then the
 * crop + resize + flip + convert kernels (gpu/kernels.cu, the math of
 * gpu/resample.h), on streams of its own, into each sample's slot.
 *
 * Submitted jobs queue; a feeder thread takes what is queued (up to a
 * group's limits) and launches the group on one of two slots (pinned host
 * + device memory, a stream, an nvJPEG state each), so one group decodes
 * while the previous one resamples and copies back; a completion thread
 * waits on each slot's event (never a device-wide sync, never the default
 * stream), copies the outputs into the slots and calls done. What the
 * hardware decoder does not take (not baseline Huffman, not 3 components
 * of 8 bits, Adobe RGB, 4:1:1 / 4:1:0, PNG, a group nvJPEG refuses) comes
 * back SL__GPU_REFUSED naming why. Where the hardware backend takes it,
 * each image is decoded only to the region (whole MCUs) its crop reads:
 * nvJPEG's ROI decode; a refusal of it turns it off, the group planned
 * again whole. GPU memory: two slots within `budget` bytes, a sample that
 * cannot fit refused. */
#ifndef SL_GPU_CUDA_STAGE_H
#define SL_GPU_CUDA_STAGE_H

#include <stddef.h>

#include "gpu/sample_plan.h"
#include "gpu/stage.h"

/* The GPU memory the stage may hold when not told (both slots). */
#define SL__GPU_BUDGET_DEFAULT ((size_t)1 << 30)
/* Samples per group at most (one nvJPEG batch). */
#define SL__GPU_GROUP_MAX 128

/* 1 when this build has the kernels (cmake/GpuKernels.cmake). */
int sl__cuda_stage_built(void);

/* Makes the stage for transform x (copied) writing sample_bytes per
 * slot, on CUDA device `device`, within `budget` bytes of GPU memory
 * (0: the default). NULL with a message naming the cause (no kernels in
 * this build, the runtime's status, an allocation or load failure). */
sl__gpu_stage_t *sl__cuda_stage_create(const sl__xform_t *x,
                                       size_t sample_bytes, int device,
                                       size_t budget, char *err, size_t errlen);

/* Stages alive in the process (tests: none outlives its loader). */
int sl__cuda_stage_count(void);

/* Device bytes nvJPEG's own allocations hold in the process-wide cache
 * (kept for reuse while any stage lives; not in a stage's budget). */
size_t sl__cuda_stage_nvjpeg_bytes(void);

/* The stage's counters since creation. */
typedef struct sl__cuda_stage_stats {
    long long groups, samples, refused;
    /* What its two slots hold from creation on (nvJPEG's own buffers,
     * through the allocator cache, not counted): pinned host bytes, which
     * a loader's memory budget pays for, and device bytes, within the
     * stage's GPU budget. */
    size_t host_bytes, dev_bytes;
    /* ROI decode (docs/DESIGN.md, "GPU stage"): roi 1 while each image is
     * decoded to the region its crop reads; roi_off the nvJPEG status that
     * turned it off mid-run (0: never refused); roi_samples decoded so;
     * px_images / px_decoded the pixels of the images launched and those
     * decoded (equal without ROI). */
    int roi, roi_off;
    long long roi_samples;
    double px_images, px_decoded;
    /* its GPU as the driver names it (cudaDeviceGetPCIBusId), for NVML's
     * telemetry of the same GPU; "" where the runtime cannot tell */
    char pci_bus_id[32];
    int hw_backend; /* 1: nvJPEG's hardware backend; 0: its default */
    /* The hardware backend's per-image check before each batch (nvJPEG's
     * nvjpegDecodeBatchedSupportedEx, with the image's region): hw_check
     * 1 while it is made; hw_check_off the nvJPEG status that turned it
     * off (0: never); hw_unsupported the images it refused (in refused
     * too: the CPU path decodes them), which would have failed their
     * whole group. */
    int hw_check, hw_check_off;
    long long hw_unsupported;
    /* nvJPEG's hardware buffers allocated at create for groups of
     * group_max images of up to prealloc_w x prealloc_h (4:4:4), so the
     * first groups do not allocate (0 x 0: not; prealloc_err the nvJPEG
     * status that refused it) */
    int prealloc_w, prealloc_h, prealloc_err;
    /* seconds create spent loading the kernels and launching each once, so
     * that the first group does not pay CUDA's lazy loading */
    double load_s;
    int group_max;           /* the most samples a group takes */
    long long largest_group; /* the most a group had */
    /* CPU seconds its own threads have used (the feeder: headers,
     * bitstream copies, nvJPEG's host work; the completer: copies back);
     * 0 where the clock cannot tell */
    double cpu_s;
} sl__cuda_stage_stats_t;
void sl__cuda_stage_stats(sl__gpu_stage_t *st, sl__cuda_stage_stats_t *out);

#endif
