/* sched/rl_file: the policy weights file (docs/POLICY.md).
 *
 *   0   8  magic "SLPOLICY"
 *   8   4  version (1)
 *   12  4  n_obs    (24 with 3 knobs, 29 with 4: sched/rl.h's two kinds)
 *   16  4  n_hidden (1..256)
 *   20  4  knobs    (3: read, decode, prefetch; 4: and the GPU share)
 *   24  4  actions per knob (3)
 *   28  4  n_params (must match the sizes above)
 *   32     float32 mean[n_obs], float32 sd[n_obs], float32 w[n_params]
 *   end-8  8  XXH3-64 of every byte before it
 * All integers and floats little-endian. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/base.h"
#include "sched/rl.h"

#define MAGIC "SLPOLICY"
#define VERSION 1u
#define HEAD 32u
#define MAX_FILE (1u << 24)

extern const unsigned char sl__rl_default_bytes[];
extern const size_t sl__rl_default_len;

static void put_f32(uint8_t *p, double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    sl__put_u32(p, u);
}

static double get_f32(const uint8_t *p)
{
    uint32_t u = sl__get_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

size_t sl__rl_policy_serialize(const sl__rl_policy_t *p, uint8_t *out,
                               size_t cap)
{
    int ni = p->net.n_in;
    size_t n = HEAD + 8u * (size_t)ni + 4 * p->net.n_params + 8;
    if (!out || cap < n)
        return n;
    memcpy(out, MAGIC, 8);
    sl__put_u32(out + 8, VERSION);
    sl__put_u32(out + 12, (uint32_t)ni);
    sl__put_u32(out + 16, (uint32_t)p->net.n_hid);
    sl__put_u32(out + 20, (uint32_t)p->net.n_knobs);
    sl__put_u32(out + 24, SL_MLP_ACTS);
    sl__put_u32(out + 28, (uint32_t)p->net.n_params);
    uint8_t *q = out + HEAD;
    for (int i = 0; i < ni; i++, q += 4)
        put_f32(q, p->mean[i]);
    for (int i = 0; i < ni; i++, q += 4)
        put_f32(q, p->sd[i]);
    for (size_t i = 0; i < p->net.n_params; i++, q += 4)
        put_f32(q, p->net.w[i]);
    sl__put_u64(q, XXH3_64bits(out, n - 8));
    return n;
}

int sl__rl_policy_parse(const uint8_t *buf, size_t len, sl__rl_policy_t *p,
                        char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (len < HEAD + 8 || memcmp(buf, MAGIC, 8))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a sluice policy (no SLPOLICY magic)");
    uint32_t ver = sl__get_u32(buf + 8), n_obs = sl__get_u32(buf + 12),
             n_hid = sl__get_u32(buf + 16), knobs = sl__get_u32(buf + 20),
             acts = sl__get_u32(buf + 24), n_params = sl__get_u32(buf + 28);
    if (ver != VERSION)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "policy format version %u (this build reads %u)", ver,
                        VERSION);
    int cpu = n_obs == SL_RL_NOBS_CPU && knobs == SL_RL_KNOBS_CPU,
        places = n_obs == SL_RL_NOBS && knobs == SL_RL_KNOBS_PLACE;
    if (!(cpu || places) || acts != SL_MLP_ACTS)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "policy for %u features, %u knobs x %u actions (this "
                        "build: %d, %d x %d, or %d, %d x %d)",
                        n_obs, knobs, acts, SL_RL_NOBS_CPU, SL_RL_KNOBS_CPU,
                        SL_MLP_ACTS, SL_RL_NOBS, SL_RL_KNOBS_PLACE,
                        SL_MLP_ACTS);
    int ni = (int)n_obs, nk = (int)knobs;
    size_t want = sl__mlp_count(ni, n_hid > 0xffff ? 0 : (int)n_hid, nk);
    if (!want || n_params != want)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%u hidden units and %u parameters do not fit", n_hid,
                        n_params);
    size_t size = HEAD + 8u * (size_t)ni + 4 * want + 8;
    if (len != size)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%zu bytes where the header says %zu (%s)", len, size,
                        len < size ? "truncated" : "trailing bytes");
    uint64_t sum = XXH3_64bits(buf, len - 8);
    if (sum != sl__get_u64(buf + len - 8))
        return sl__fail(err, errlen, SL_ECHECKSUM,
                        "checksum mismatch (file altered or truncated)");
    int rc = sl__mlp_init(&p->net, ni, (int)n_hid, nk);
    if (rc)
        return sl__fail(err, errlen, rc, "out of memory");
    const uint8_t *q = buf + HEAD;
    for (int i = 0; i < ni; i++, q += 4)
        p->mean[i] = get_f32(q);
    for (int i = 0; i < ni; i++, q += 4)
        p->sd[i] = get_f32(q);
    for (int i = ni; i < SL_RL_NOBS; i++)
        p->sd[i] = 1; /* features the policy does not read */
    for (size_t i = 0; i < want; i++, q += 4)
        p->net.w[i] = get_f32(q);
    for (int i = 0; i < ni; i++)
        if (!isfinite(p->mean[i]) || !(p->sd[i] > 0) || !isfinite(p->sd[i])) {
            sl__rl_policy_free(p);
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "feature %d: mean %g, sd %g (sd must be finite "
                            "and > 0)",
                            i, get_f32(buf + HEAD + 4 * i),
                            get_f32(buf + HEAD + 4 * (ni + i)));
        }
    for (size_t i = 0; i < want; i++)
        if (!isfinite(p->net.w[i])) {
            sl__rl_policy_free(p);
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "weight %zu is not finite", i);
        }
    return 0;
}

int sl__rl_policy_load(const char *path, sl__rl_policy_t *p, char *err,
                       size_t errlen)
{
    memset(p, 0, sizeof *p);
    char *buf = NULL;
    size_t n = 0;
    int rc = sl__read_small_file(path, MAX_FILE, &buf, &n, err, errlen);
    if (rc)
        return rc;
    char why[256];
    if ((rc = sl__rl_policy_parse((const uint8_t *)buf, n, p, why, sizeof why)))
        sl__fail(err, errlen, rc, "%s: %s", path, why);
    free(buf);
    return rc;
}

int sl__rl_policy_save(const char *path, const sl__rl_policy_t *p, char *err,
                       size_t errlen)
{
    size_t n = sl__rl_policy_serialize(p, NULL, 0);
    uint8_t *buf = malloc(n);
    if (!buf)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    sl__rl_policy_serialize(p, buf, n);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return sl__fail(err, errlen, SL_EIO, "%s: %s", path, strerror(errno));
    }
    int ok = fwrite(buf, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    free(buf);
    if (!ok)
        return sl__fail(err, errlen, SL_EIO, "%s: write failed", path);
    return 0;
}

int sl__rl_policy_default(sl__rl_policy_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (sl__rl_default_len == 0)
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "this build has no default policy "
                        "(policies/default.bin was missing); give a policy "
                        "file");
    char why[256];
    int rc = sl__rl_policy_parse(sl__rl_default_bytes, sl__rl_default_len, p,
                                 why, sizeof why);
    if (rc)
        return sl__fail(err, errlen, rc, "built-in default policy: %s", why);
    return 0;
}
