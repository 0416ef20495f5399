/* data/shard_out: a pack written whole or not at all (what `sluice pack`
 * and `pack --text` write; see shard_out.h). */
#include "data/shard_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "codec/choose.h"
#include "codec/codec.h"
#include "data/manifest.h"

/* 1 for a file a pack folder holds: a shard (*.sls), classes.txt, the
 * manifest, or a writer's temp file of one of them (".NAME.tmp-..."). */
static int pack_file(const char *name)
{
    if (name[0] == '.') {
        const char *t = strstr(name, ".tmp-");
        if (!t)
            return 0;
        size_t n = (size_t)(t - name) - 1;
        char base[256];
        if (n == 0 || n >= sizeof base)
            return 0;
        memcpy(base, name + 1, n);
        base[n] = 0;
        return pack_file(base);
    }
    size_t n = strlen(name);
    return (n > 4 && !strcmp(name + n - 4, ".sls")) ||
           !strcmp(name, "classes.txt") || !strcmp(name, SL__MANIFEST_NAME) ||
           !strcmp(name, SL__PACK_INFO_NAME);
}

/* Counts the pack files in dir into *pack; the first other entry's name
 * goes to other (empty when none). @return 0, or -1 (errno) when dir
 * cannot be read. */
static int survey(const char *dir, int *pack, char *other, size_t len)
{
    *pack = 0;
    other[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (pack_file(e->d_name))
            (*pack)++;
        else if (!other[0])
            snprintf(other, len, "%s", e->d_name);
    }
    closedir(d);
    return 0;
}

/* Removes a pack folder: its pack files, then the folder (left in place
 * if anything else appeared in it). */
static void remove_pack(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!pack_file(e->d_name))
            continue;
        char *path = sl__path_join(dir, e->d_name);
        if (path)
            unlink(path);
        free(path);
    }
    closedir(d);
    rmdir(dir);
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* "PARENT/.BASE.WHAT-PID" beside dir (trailing slashes ignored), and
 * PARENT into parent (when not NULL). NULL when out of memory. */
static char *sibling(const char *dir, const char *what, char **parent)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    char *out = NULL;
    if (asprintf(&out, "%.*s.%.*s.%s-%ld", (int)b, dir, (int)(n - b), dir + b,
                 what, (long)getpid()) < 0)
        return NULL;
    if (parent &&
        asprintf(parent, "%.*s", (int)(b ? b : 1), b ? dir : ".") < 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Removes the temp folders of packs into dir that were killed
 * (.BASE.tmp-PID or .BASE.old-PID beside it, PID no longer running), so
 * that they do not pile up. A live PID's folder is left: another pack may
 * be writing it. */
static void remove_stale(const char *dir)
{
    char *parent = NULL, *mine = sibling(dir, "tmp", &parent);
    if (!mine) {
        free(parent);
        return;
    }
    /* mine = PARENT/.BASE.tmp-PID: the prefix to match is ".BASE." */
    const char *name = strrchr(mine, '/') ? strrchr(mine, '/') + 1 : mine;
    size_t pre = (size_t)(strstr(name, ".tmp-") - name) + 1;
    DIR *d = opendir(parent);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *rest = e->d_name + pre;
        if (strncmp(e->d_name, name, pre) || strlen(e->d_name) <= pre ||
            (strncmp(rest, "tmp-", 4) && strncmp(rest, "old-", 4)))
            continue;
        char *end;
        long pid = strtol(rest + 4, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char *path = sl__path_join(parent, e->d_name);
        if (path)
            remove_pack(path);
        free(path);
    }
    if (d)
        closedir(d);
    free(mine);
    free(parent);
}

int sl__pack_out_begin(sl__pack_out_t *o, char *err, size_t errlen)
{
    struct stat st;
    if (stat(o->dir, &st) == 0) {
        int pack = 0;
        char other[256];
        if (!S_ISDIR(st.st_mode))
            return sl__fail(err, errlen, SL_EIO, "%s: not a folder", o->dir);
        if (survey(o->dir, &pack, other, sizeof other))
            return sl__fail(err, errlen, SL_EIO, "%s: cannot read: %s", o->dir,
                            strerror(errno));
        if (other[0])
            return sl__fail(err, errlen, SL_ESTATE,
                            "%s holds %s, which is not part of a pack: pack "
                            "into a new or empty folder (a pack replaces the "
                            "whole folder)",
                            o->dir, other);
        if (pack && !o->force)
            return sl__fail(err, errlen, SL_ESTATE,
                            "%s already holds a pack (%d file(s)); use --force "
                            "to replace it",
                            o->dir, pack);
    } else if (errno != ENOENT) {
        return sl__fail(err, errlen, SL_EIO, "%s: %s", o->dir, strerror(errno));
    }
    /* A symlink to a folder: the pack goes where it points (its temp
     * folder beside the target, on the target's file system), and the
     * link stays a link. */
    struct stat lst;
    if (lstat(o->dir, &lst) == 0 && S_ISLNK(lst.st_mode))
        o->final = realpath(o->dir, NULL);
    else
        o->final = strdup(o->dir);
    if (o->final) {
        remove_stale(o->final);
        o->tmp = sibling(o->final, "tmp", NULL);
    }
    if (!o->final || !o->tmp) {
        free(o->final);
        o->final = NULL;
        return sl__fail(err, errlen, SL_ENOMEM, "%s: %s", o->dir,
                        strerror(errno));
    }
    /* The temp folder is made beside OUT, so the folders above OUT are
     * made as `mkdir -p` makes them; it must be new (one already there is
     * another pack's). A failure names OUT, the folder the user gave, not
     * the temp folder. */
    int made = sl__mkdir_made(o->tmp, 0755);
    if (made != 1) {
        int e = made == 0 ? EEXIST : errno;
        int rc = sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", o->dir,
                          strerror(e));
        free(o->tmp);
        free(o->final);
        o->tmp = o->final = NULL;
        return rc;
    }
    return 0;
}

int sl__pack_out_classes(const sl__pack_out_t *o, char *const *names, int n,
                         char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, ".classes.txt.tmp-%ld", (long)getpid());
    char *path = sl__path_join(o->tmp, "classes.txt");
    char *tmp = sl__path_join(o->tmp, name);
    if (!path || !tmp) {
        free(path);
        free(tmp);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", tmp,
                      strerror(errno));
        goto done;
    }
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s\n", names[i]);
    int ok = !ferror(fp) && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", path,
                      strerror(errno));
        unlink(tmp);
    }
done:
    free(path);
    free(tmp);
    return rc;
}

static int finish_shard(sl__pack_out_t *o, char *err, size_t errlen);

/* Shard k's path in the temp folder (malloc'd; NULL: out of memory): as
 * long as the folder's, never cut to a fixed buffer. */
static char *shard_path(const sl__pack_out_t *o, long k)
{
    char name[32];
    snprintf(name, sizeof name, "shard-%05ld.sls", k);
    return sl__path_join(o->tmp, name);
}

/* Frees the records held for a shard being chosen. */
static void drop_pending(sl__pack_out_t *o)
{
    for (size_t i = 0; i < o->npend; i++)
        free(o->pend_name[i]);
    free(o->pend_n);
    free(o->pend_label);
    free(o->pend_name);
    sl__bytes_free(&o->pend);
    o->pend_n = NULL;
    o->pend_label = NULL;
    o->pend_name = NULL;
    o->npend = o->cap_pend = 0;
    o->pend_cost = 0;
}

/* Appends one line describing shard k's choice to o->info. */
static int note_choice(sl__pack_out_t *o, long k, const sl__choice_t *c)
{
    sl__pack_shard_info_t *ni =
        realloc(o->info, (size_t)(o->ninfo + 1) * sizeof *ni);
    if (!ni)
        return SL_ENOMEM;
    o->info = ni;
    char *l = ni[o->ninfo++].line;
    size_t len = sizeof ni->line;
    int at = snprintf(l, len, "shard-%05ld.sls: %s", k, c->name);
    if (c->codec == SL_CODEC_ZSTD_DICT && at < (int)len)
        at += snprintf(l + at, len - (size_t)at, " (dictionary %zu bytes)",
                       c->dict.n);
    for (int r = 0; r < c->nrows && at < (int)len; r++)
        if (!strcmp(c->rows[r].name, c->name))
            at += snprintf(l + at, len - (size_t)at,
                           " ratio %.3f, decode %.2f ns/B", c->rows[r].ratio,
                           c->rows[r].dec_ns);
    if (c->note[0] && at < (int)len)
        snprintf(l + at, len - (size_t)at, " [no dictionary: %s]", c->note);
    return 0;
}

/* Chooses the codec of the held records, writes them as one shard and
 * finishes it. */
static int flush_pending(sl__pack_out_t *o, char *err, size_t errlen)
{
    if (!o->npend)
        return 0;
    sl__choice_t c;
    int rc = sl__codec_choose(o->pend.p, o->pend_n, o->npend, o->pend.n,
                              o->codec == SL__PACK_CODEC_AUTO, o->auto_max_dec,
                              &c, err, errlen);
    if (rc)
        return rc;
    char *path = shard_path(o, o->shards);
    if (!path)
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    sl__shard_codec_t sc = {c.codec, c.level, c.dict.p, c.dict.n};
    if (!rc)
        rc = note_choice(o, o->shards, &c)
                 ? sl__fail(err, errlen, SL_ENOMEM, "out of memory")
                 : 0;
    if (!rc && !(rc = sl__shard_writer_open_ex(path, &sc, &o->w, err, errlen)))
        o->shards++;
    free(path);
    const uint8_t *at = o->pend.p;
    for (size_t i = 0; i < o->npend && !rc; i++) {
        rc = sl__shard_writer_add(o->w, at, o->pend_n[i], o->pend_label[i],
                                  o->pend_name[i], err, errlen);
        at += o->pend_n[i];
    }
    sl__bytes_free(&c.dict);
    drop_pending(o);
    return rc ? rc : finish_shard(o, err, errlen);
}

/* add for the codecs chosen per shard: the record is checked now (so a
 * bad one is the record's fault, as with a direct write) and held. */
static int add_pending(sl__pack_out_t *o, const void *p, size_t n,
                       int64_t label, const char *name, int *fatal, char *err,
                       size_t errlen)
{
    int rc = sl__shard_record_check(o->dir, name, n, err, errlen);
    if (rc) {
        *fatal = 0;
        return rc;
    }
    uint64_t cost = sl__shard_record_cost(SL_CODEC_ZSTD, n, name);
    /* The dictionary the shard may get (codec/choose: a fiftieth of the
     * sample, 1 KiB to SL__CHOOSE_DICT). */
    uint64_t dict = (o->pend.n + n) / 50;
    dict = dict < 1024 ? 1024 : dict > SL__CHOOSE_DICT ? SL__CHOOSE_DICT : dict;
    if (o->npend && o->pend_cost + cost + dict > (uint64_t)o->shard_size &&
        (rc = flush_pending(o, err, errlen)))
        return rc;
    if (o->npend == o->cap_pend) {
        size_t cap = o->cap_pend ? 2 * o->cap_pend : 256;
        size_t *nn = realloc(o->pend_n, cap * sizeof *nn);
        if (nn)
            o->pend_n = nn;
        int64_t *nl = realloc(o->pend_label, cap * sizeof *nl);
        if (nl)
            o->pend_label = nl;
        char **nm = realloc(o->pend_name, cap * sizeof *nm);
        if (nm)
            o->pend_name = nm;
        if (!nn || !nl || !nm)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        o->cap_pend = cap;
    }
    char *copy = strdup(name);
    if (!copy || sl__bytes_reserve(&o->pend, o->pend.n + n + 1)) {
        free(copy);
        return sl__fail(err, errlen, SL_ENOMEM,
                        "out of memory holding a shard's records");
    }
    if (n)
        memcpy(o->pend.p + o->pend.n, p, n);
    o->pend.n += n;
    o->pend_n[o->npend] = n;
    o->pend_label[o->npend] = label;
    o->pend_name[o->npend++] = copy;
    o->pend_cost += cost;
    return 0;
}

/* pack-info.txt: each chosen shard's codec, then o->extra; only when
 * there is something to say. */
static int write_info(const sl__pack_out_t *o, char *err, size_t errlen)
{
    if (!o->ninfo && !o->extra)
        return 0;
    char *path = sl__path_join(o->tmp, SL__PACK_INFO_NAME);
    if (!path)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    FILE *fp = fopen(path, "w");
    if (!fp) {
        int rc = sl__fail(err, errlen, SL_EIO, "%s: cannot create: %s", path,
                          strerror(errno));
        free(path);
        return rc;
    }
    fprintf(fp, "# sluice pack notes: each shard's codec, lossy packing\n");
    for (long k = 0; k < o->ninfo; k++)
        fprintf(fp, "codec %s\n", o->info[k].line);
    if (o->extra)
        fputs(o->extra, fp);
    int ok = !ferror(fp) && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok = (fclose(fp) == 0) && ok;
    int rc = ok ? 0
                : sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", path,
                           strerror(errno));
    free(path);
    return rc;
}

void sl__pack_out_free(sl__pack_out_t *o)
{
    drop_pending(o);
    free(o->info);
    o->info = NULL;
    o->ninfo = 0;
}

/* Finishes the open shard, if any. */
static int finish_shard(sl__pack_out_t *o, char *err, size_t errlen)
{
    if (!o->w)
        return 0;
    o->bytes_out += sl__shard_writer_bytes(o->w);
    int rc = sl__shard_writer_finish(o->w, err, errlen);
    o->w = NULL;
    return rc;
}

/* The manifest of the pack in o->tmp, from its shards' headers. */
static int make_manifest(const sl__pack_out_t *o, sl__manifest_t *m, char *err,
                         size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->shards = calloc((size_t)o->shards + 1, sizeof *m->shards);
    if (!m->shards)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = 0;
    for (long k = 0; k < o->shards && !rc; k++) {
        sl__manifest_shard_t *ms = &m->shards[k];
        sl__shard_t *s = NULL;
        if (asprintf(&ms->name, "shard-%05ld.sls", k) < 0) {
            ms->name = NULL;
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            break;
        }
        m->nshards++;
        char *path = sl__path_join(o->tmp, ms->name);
        rc = path ? sl__shard_open(path, &s, err, errlen)
                  : sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        free(path);
        if (rc)
            break;
        ms->bytes = sl__shard_size(s);
        ms->records = sl__shard_count(s);
        ms->digest = sl__shard_digest(s);
        m->records += ms->records;
        sl__shard_close(s);
    }
    char **names = NULL;
    int n = 0;
    int crc =
        rc ? 0
           : sl__classes_read(o->tmp, &names, &n, &m->classes_sum, err, errlen);
    if (crc == SL_ENOTFOUND)
        n = -1;
    else if (crc)
        rc = crc;
    m->classes = n;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc)
        sl__manifest_free(m);
    return rc;
}

/* Puts the pack in o->tmp at o->final: a rename when it is missing or
 * empty, else an atomic exchange with the old pack (two renames where the
 * file system cannot exchange), which is then removed. */
static int move_into_place(sl__pack_out_t *o, char *err, size_t errlen)
{
    const char *dir = o->final;
    char *parent = NULL, *old = sibling(dir, "old", &parent);
    if (!old)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = 0;
    if (rename(o->tmp, dir) == 0) {
        /* dir was missing or empty */
    } else if (errno != EEXIST && errno != ENOTEMPTY) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: cannot rename to %s: %s",
                      o->tmp, dir, strerror(errno));
    } else if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, dir, RENAME_EXCHANGE) ==
               0) {
        remove_pack(o->tmp); /* the old pack, now there */
    } else if (rename(dir, old) || rename(o->tmp, dir)) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: cannot replace: %s", dir,
                      strerror(errno));
        rename(old, dir); /* put the old pack back if it moved */
    } else {
        remove_pack(old);
    }
    if (!rc)
        fsync_dir(parent);
    free(old);
    free(parent);
    return rc;
}

int sl__pack_out_commit(sl__pack_out_t *o, char *err, size_t errlen)
{
    sl__manifest_t m;
    int rc = flush_pending(o, err, errlen);
    if (!rc)
        rc = finish_shard(o, err, errlen);
    if (!rc)
        rc = write_info(o, err, errlen);
    if (!rc)
        rc = make_manifest(o, &m, err, errlen);
    if (!rc) {
        rc = sl__manifest_write(o->tmp, &m, err, errlen);
        sl__manifest_free(&m);
    }
    if (!rc) {
        fsync_dir(o->tmp);
        rc = move_into_place(o, err, errlen);
    }
    if (rc) {
        sl__pack_out_abort(o);
        return rc;
    }
    free(o->tmp);
    free(o->final);
    o->tmp = o->final = NULL;
    return 0;
}

void sl__pack_out_abort(sl__pack_out_t *o)
{
    drop_pending(o);
    if (o->w)
        sl__shard_writer_abort(o->w);
    o->w = NULL;
    if (o->tmp)
        remove_pack(o->tmp);
    free(o->tmp);
    free(o->final);
    o->tmp = o->final = NULL;
}

int sl__pack_out_add(sl__pack_out_t *o, const void *p, size_t n, int64_t label,
                     const char *name, int *fatal, char *err, size_t errlen)
{
    *fatal = 1;
    if (o->codec == SL_CODEC_ZSTD_DICT || o->codec == SL__PACK_CODEC_AUTO)
        return add_pending(o, p, n, label, name, fatal, err, errlen);
    if (o->w && sl__shard_writer_count(o->w) > 0 &&
        sl__shard_writer_bytes(o->w) +
                sl__shard_record_cost(o->codec, n, name) >
            (uint64_t)o->shard_size) {
        int rc = finish_shard(o, err, errlen);
        if (rc)
            return rc;
    }
    if (!o->w) {
        char *path = shard_path(o, o->shards);
        if (!path)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        int rc = sl__shard_writer_open(path, o->codec, &o->w, err, errlen);
        free(path);
        if (rc)
            return rc;
        o->shards++;
    }
    int rc = sl__shard_writer_add(o->w, p, n, label, name, err, errlen);
    *fatal = rc != SL_EINVAL && rc != SL_ERANGE;
    return rc;
}
