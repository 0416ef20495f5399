/* A simulated GPU stage for tests (gpu/stage.h): the CPU decode behind
 * the stage's interface, on a thread of its own, so routing, fallback and
 * the stream's identity are tested without a GPU. It refuses a PNG (as
 * the real stage does: nvJPEG decodes JPEG only), a box that is not whole
 * pixels, and whatever `refuse` says (NULL: nothing more). */
#ifndef SL_TEST_GPU_SIM_H
#define SL_TEST_GPU_SIM_H

#include "gpu/stage.h"
#include "ops/image.h"

typedef int (*gpu_sim_refuse_fn)(const sl__gpu_job_t *job, void *ctx,
                                 const char **why);

/* x: the loader's transform (its output size, dtype, layout, mean, std;
 * the box and flip come with each job). NULL when out of memory. */
sl__gpu_stage_t *gpu_sim_create(const sl__xform_t *x, gpu_sim_refuse_fn refuse,
                                void *refuse_ctx);
/* Jobs taken and done so far (for the tests' counts). */
long gpu_sim_done(sl__gpu_stage_t *st);

#endif
