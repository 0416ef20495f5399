/* Fuzz target: any bytes as a volume record of a pack (volume/volrec, as
 * `sluice pack --volumes` writes them): the layout is parsed, then every
 * volume it holds is loaded from memory (NIfTI header decode and checks,
 * conversion, affine, RAS) under a 16 MB max_bytes. Nothing may crash or
 * read outside the bytes; a parsed record's parts lie inside them. */
#include <stdint.h>
#include <stdlib.h>

#include "volume/vol_internal.h"
#include "volume/volrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    sl__volrec_t r;
    if (sl__volrec_parse(data, size, &r, err, sizeof err))
        return 0;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.max_bytes = 16 << 20;
    for (int k = 0; k < r.count; k++) {
        const struct sl__volrec_part *p = &r.part[k];
        if (p->hdr < data || p->data + p->dlen > data + size ||
            p->hdr + p->hlen != p->data)
            abort();
        for (int orient = 0; orient < 2; orient++) {
            o.orient = orient;
            sl_volume_t *v = NULL;
            if (!sl__nifti_load_mem(p->hdr, p->hlen, p->data, (size_t)p->dlen,
                                    "fuzz", &o, NULL, &v, err, sizeof err) &&
                (!v || !v->data))
                abort();
            sl_volume_free(v);
        }
    }
    return 0;
}
