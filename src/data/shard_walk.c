/* data/shard_walk: folder listing, classes.txt count, index summary and
 * checked reads over whole shards (see shard_walk.h). */
#include "shard_walk.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "data/manifest.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void sl__shard_list_free(char **paths, int n)
{
    sl__strv_free(paths, n);
}

int sl__shard_list(const char *dir, char ***paths, int *n)
{
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return SL_EIO;
    char **v = NULL;
    int cnt = 0, rc = 0;
    size_t cap = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 ||
            strcmp(e->d_name + len - 4, ".sls"))
            continue;
        if (sl__array_reserve(&v, &cap, (size_t)cnt + 1, sizeof *v, 64)) {
            rc = SL_ENOMEM;
            break;
        }
        if (!(v[cnt] = sl__path_join(dir, e->d_name)))
            rc = SL_ENOMEM;
        else
            cnt++;
    }
    closedir(d);
    if (rc) {
        sl__shard_list_free(v, cnt);
        return rc;
    }
    if (v)
        qsort(v, (size_t)cnt, sizeof *v, cmp_str);
    *paths = v;
    *n = cnt;
    return 0;
}

long sl__classes_count(const char *dir)
{
    char **names;
    int n;
    if (sl__classes_read(dir, &names, &n, NULL, NULL, 0))
        return -1;
    sl__strv_free(names, n);
    return n;
}

int sl__shard_summarize(const sl__shard_t *s, sl__shard_summary_t *out)
{
    memset(out, 0, sizeof *out);
    uint64_t n = sl__shard_count(s);
    int64_t *labels = malloc((n ? n : 1) * sizeof *labels);
    if (!labels)
        return SL_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const sl__shard_entry_t *e = sl__shard_entry(s, i);
        out->raw_bytes += e->raw_size;
        out->stored_bytes += e->stored_size;
        out->per_codec[e->codec & (SL__SHARD_CODECS - 1)]++;
        labels[i] = e->label;
    }
    qsort(labels, n, sizeof *labels, cmp_i64);
    for (uint64_t i = 0; i < n; i++)
        out->labels_distinct += i == 0 || labels[i] != labels[i - 1];
    out->records = n;
    if (n) {
        out->label_min = labels[0];
        out->label_max = labels[n - 1];
    }
    free(labels);
    return 0;
}

uint64_t sl__shard_check(const sl__shard_t *s, long classes,
                         sl__shard_damage_fn on_damage, void *ctx,
                         uint64_t *bytes)
{
    char err[1024];
    sl__bytes_t out = {0}, scratch = {0};
    uint64_t n = sl__shard_count(s), bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t stored = 0;
        int rc = sl__shard_read(s, i, &out, &scratch, &stored, err, sizeof err);
        if (!rc)
            rc = sl__shard_label_check(s, i, classes, err, sizeof err);
        if (rc) {
            on_damage(ctx, err);
            bad++;
        }
        *bytes += stored;
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    return bad;
}
