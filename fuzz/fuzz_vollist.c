/* Fuzz target: any bytes as a volume list file (volume/dataset's
 * open_list, `sluice volume list LIST`): lines of IMAGE [LABEL], paths
 * relative to the list's folder, which holds a.nii and b.nii. Nothing may
 * crash, leak or read out of bounds; a list with a NUL byte is refused (a
 * NUL must not end the list early); a list that opens has 1..lines cases,
 * each with a name and an image that exist, and a label where it says so.
 * Seeds: fuzz/corpus/fuzz_vollist/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/fuzz_vollist.XXXXXX", list[64], a[64], b[64];

static void cleanup(void)
{
    unlink(list), unlink(a), unlink(b), rmdir(dir);
}

static void put(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f))
        abort();
}

static int exists(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!list[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(list, sizeof list, "%s/l.list", dir);
        snprintf(a, sizeof a, "%s/a.nii", dir);
        snprintf(b, sizeof b, "%s/b.nii", dir);
        put(a, "x", 1), put(b, "x", 1);
        atexit(cleanup);
    }
    put(list, data, size);
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = size && data[0] & 1; /* both rules, from the bytes */
    sl_volume_dataset_t *d = NULL;
    char err[1024];
    if (sl_volume_dataset_open(list, &o, &d, err, sizeof err)) {
        if (d)
            abort();
        return 0;
    }
    if (memchr(data, 0, size))
        abort(); /* a NUL byte must be refused */
    int64_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    int64_t n = sl_volume_dataset_count(d);
    if (n < 1 || n > lines)
        abort();
    for (int64_t i = 0; i < n; i++) {
        const char *lab = sl_volume_dataset_label(d, i);
        if (!sl_volume_dataset_name(d, i) ||
            !exists(sl_volume_dataset_image(d, i)) || (lab && !exists(lab)) ||
            (!lab && !o.unlabeled) ||
            sl_volume_dataset_has_label(d, i) != (lab != NULL))
            abort();
    }
    sl_volume_dataset_destroy(d);
    return 0;
}
