/* Fuzz target: any bytes as a WebDataset tar shard (data/tar_walk,
 * data/wds): indexed strictly and with skip, every sample read and
 * described (which walks its header again). The index must agree with
 * itself: a good sample's bytes lie inside the input. Nothing may crash,
 * leak, read out of bounds or allocate from an unchecked size. The seed
 * corpus (fuzz/corpus/fuzz_wds/) holds tars as Python's tarfile writes
 * them (pax, GNU, ustar) and damaged variants. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recfile_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exactly sized copy, so ASan sees any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    fuzz_recfile_run(copy, size, SL__FMT_WDS, "fuzz.tar", 0);
    fuzz_recfile_run(copy, size, SL__FMT_WDS, "fuzz.tar", 1);
    free(copy);
    return 0;
}
