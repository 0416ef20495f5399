#include "core/options.h"

#include "base/base.h"
#include "telemetry/machine.h"

int sl__opts_common(const sl__common_opts_t *c, char *err, size_t errlen)
{
    if (*c->world_size == 0)
        *c->world_size = 1;
    if (*c->epochs == 0)
        *c->epochs = 1;
    if (*c->world_size < 1 || *c->rank < 0 || *c->rank >= *c->world_size)
        return sl__fail(err, errlen, SL_EINVAL,
                        "rank %d is not in [0, world size %d)", *c->rank,
                        *c->world_size);
    if (*c->epochs < 1)
        return sl__fail(err, errlen, SL_EINVAL, "epochs %lld < 1",
                        (long long)*c->epochs);
    if (*c->on_error != SL_ON_ERROR_FAIL && *c->on_error != SL_ON_ERROR_SKIP)
        return sl__fail(err, errlen, SL_EINVAL, "unknown on_error %d",
                        *c->on_error);
    if (*c->policy != SL_POLICY_HEURISTIC && *c->policy != SL_POLICY_STATIC &&
        *c->policy != SL_POLICY_RL)
        return sl__fail(err, errlen, SL_EINVAL, "unknown policy %d",
                        *c->policy);
    return 0;
}

int sl__default_threads(void)
{
    return sl__cpus_usable();
}
