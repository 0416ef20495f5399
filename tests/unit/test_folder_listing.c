/* What an ImageFolder listing leaves out, and how it says so (a robustness
 * probe's findings): files in a format torchvision lists but sluice does
 * not decode (one warning, not a skip); a folder or file whose path is
 * PATH_MAX or longer, and an entry that cannot be stat'ed (named, never
 * dropped silently); control bytes of file names escaped in messages;
 * skips counted when their batch is handed out, not when read-ahead
 * decoded it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "data/folder.h"
#include "sluice/sluice.h"
#include "testutil.h"

#define WATCHDOG_S 60

static sl_options_t opts(int on_error)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.no_shuffle = 1;
    o.read_threads = 2;
    o.decode_threads = 2;
    o.telemetry_ms = -1;
    o.on_error = on_error;
    return o;
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

/* The skip message holding s, or NULL. */
static const char *skipped_with(const sl_loader_t *l, const char *s)
{
    for (int64_t i = 0; i < sl_loader_skipped_count(l); i++) {
        const char *m = sl_loader_skipped_message(l, i);
        if (m && strstr(m, s))
            return m;
    }
    return NULL;
}

static int has_control_byte(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* .webp/.BMP/.tif (torchvision's IMG_EXTENSIONS) are left out with one
 * warning naming the first by path; .gif and .txt are ignored, as
 * torchvision ignores them. Not a skip: the folder opens under fail. */
static void test_foreign_formats(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("fl-foreign", 2, 2, 20, 20);
    put(root, "c1/x.webp", "RIFF....WEBP");
    put(root, "c0/y.BMP", "BM");
    put(root, "c1/a.tif", "II*");
    put(root, "c1/b.gif", "GIF89a");
    put(root, "c0/notes.txt", "hello");

    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 4);
    assert_int_equal(f->nnotes, 1);
    assert_int_equal(f->notes[0].lost, 0);
    char want[1024];
    snprintf(want, sizeof want,
             "3 files in a format sluice does not decode (.bmp 1, .tif 1, "
             ".webp 1; JPEG and PNG only) left out, the first: %s/c0/y.BMP",
             root);
    assert_string_equal(f->notes[0].msg, want);
    sl__folder_free(f);

    for (int mode = 0; mode < 2; mode++) {
        sl_options_t o = opts(mode ? SL_ON_ERROR_SKIP : SL_ON_ERROR_FAIL);
        sl_loader_t *l = NULL;
        assert_int_equal(sl_loader_create(root, &o, &l), 0);
        assert_int_equal(sl_loader_num_samples(l), 4);
        const char *m = skipped_with(l, "does not decode");
        assert_non_null(m);
        assert_int_equal(strncmp(m, "warning: 3 files", 16), 0);
        sl_stats_t st;
        sl_stats_init(&st);
        assert_int_equal(sl_loader_stats(l, &st), 0);
        assert_int_equal(st.errors_skipped, 0);
        sl_loader_destroy(l);
    }
    tu_rmtree(root);
    free(root);

    /* Only foreign files: the open's error says why nothing was found. */
    root = tu_tmpdir("fl-foreign-only");
    char path[1024];
    snprintf(path, sizeof path, "%s/c0", root);
    assert_int_equal(mkdir(path, 0755), 0);
    put(root, "c0/a.webp", "x");
    put(root, "c0/b.webp", "x");
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err),
                     SL_ENOTFOUND);
    assert_non_null(strstr(err, "no .jpg/.jpeg/.png files"));
    assert_non_null(strstr(err, "2 files in a format sluice does not decode "
                                "(.webp 2; JPEG and PNG only)"));
    tu_rmtree(root);
    free(root);
}

/* Class folders with no image keep their labels (torchvision's
 * class_to_idx numbering) and are named in one warning, since
 * torchvision's ImageFolder refuses them; not a skip. */
static void test_empty_class_folders(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("fl-empty", 2, 2, 20, 20); /* c0, c1 */
    char path[1024];
    const char *empty[2] = {"b_empty", "d_empty"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", root, empty[k]);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    assert_int_equal(f->nclasses, 4); /* b_empty c0 c1 d_empty */
    assert_int_equal(f->n, 4);
    assert_int_equal(f->labels[0], 1); /* c0's, after b_empty */
    assert_int_equal(f->nnotes, 1);
    assert_int_equal(f->notes[0].lost, 0);
    char want[1024];
    snprintf(want, sizeof want, "%s/b_empty: 2 class folders with no image",
             root);
    assert_int_equal(strncmp(f->notes[0].msg, want, strlen(want)), 0);
    sl__folder_free(f);
    sl_options_t o = opts(SL_ON_ERROR_FAIL);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_non_null(skipped_with(l, "ImageFolder refuses an empty class"));
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

/* c/D/D/... (names of 250 bytes) until the path passes PATH_MAX, made
 * relative to each folder (mkdirat), an image at the bottom; *depth_len
 * gets the length of the deepest folder's path. The fd of the deepest
 * folder is returned (the caller closes it). */
static int deep_tree(const char *root, const char *cls, size_t *depth_len)
{
    char name[251];
    memset(name, 'D', 250);
    name[250] = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, cls);
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    size_t len = strlen(path);
    while (len < PATH_MAX + 100) {
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        int sub = openat(fd, name, O_RDONLY | O_DIRECTORY);
        assert_true(sub >= 0);
        close(fd);
        fd = sub;
        len += 251;
    }
    *depth_len = len;
    return fd;
}

/* A folder whose path is PATH_MAX or longer cannot be opened by path: it
 * was dropped without a word (stat of the full path failed with
 * ENAMETOOLONG, and the entry was not named like an image). Now it is a
 * bad entry: the open fails naming it, or under skip it is left out,
 * counted and listed. */
static void test_path_max_folder(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fl-deep", 1, 2, 20, 20);
    size_t len = 0;
    int fd = deep_tree(root, "c0", &len);
    char src[1024];
    snprintf(src, sizeof src, "%s/c0/i00.jpg", root);
    size_t n;
    uint8_t *p = tu_read_file(src, &n);
    int out = openat(fd, "deep.jpg", O_WRONLY | O_CREAT, 0644);
    assert_true(out >= 0);
    assert_int_equal(write(out, p, n), (ssize_t)n);
    close(out);
    close(fd);
    free(p);

    sl__folder_t *f = NULL;
    char err[8192];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), SL_EIO);
    assert_non_null(strstr(err, "DDDD"));
    assert_non_null(strstr(err, "cannot open folder: File name too long"));

    assert_int_equal(sl__folder_scan(root, 1, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 2);
    assert_int_equal(f->nnotes, 1);
    assert_int_equal(f->notes[0].lost, 1);
    assert_non_null(strstr(f->notes[0].msg, "File name too long"));
    assert_non_null(strstr(f->notes[0].msg, "left out"));
    sl__folder_free(f);

    sl_options_t o = opts(SL_ON_ERROR_SKIP);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_stats_t st;
    sl_stats_init(&st);
    assert_int_equal(sl_loader_stats(l, &st), 0);
    assert_int_equal(st.errors_skipped, 1);
    assert_non_null(skipped_with(l, "File name too long"));
    sl_loader_destroy(l);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* A file whose own path passes PATH_MAX, in a folder that can be opened:
 * named at listing (it cannot be opened by path), never a cut path read. */
static void test_path_max_file(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fl-longfile", 1, 2, 20, 20);
    char name[251];
    memset(name, 'D', 250);
    name[250] = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/c0", root);
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    size_t len = strlen(path);
    while (len + 251 < PATH_MAX - 2) { /* the folder stays openable */
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        int sub = openat(fd, name, O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = sub;
        len += 251;
    }
    /* len + 1 + flen = PATH_MAX + 1 bytes: one past what open takes */
    size_t flen = PATH_MAX - len;
    assert_true(flen >= 8 && flen <= 255);
    char file[256];
    memset(file, 'f', flen - 4);
    strcpy(file + flen - 4, ".jpg");
    int out = openat(fd, file, O_WRONLY | O_CREAT, 0644);
    assert_true(out >= 0);
    close(out);
    close(fd);

    sl__folder_t *f = NULL;
    char err[8192];
    assert_int_equal(sl__folder_scan(root, 1, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 2);
    assert_int_equal(f->nnotes, 1);
    assert_int_equal(f->notes[0].lost, 1);
    assert_non_null(strstr(f->notes[0].msg, "ffff.jpg: cannot open: File "
                                            "name too long (a path of"));
    sl__folder_free(f);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* An entry that cannot be stat'ed and is not named like an image (a
 * dangling link, a link loop) was ignored without a word: it could be a
 * folder of samples. Now it is a warning naming it and the cause. */
static void test_unstattable_entry(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("fl-nostat", 1, 2, 20, 20);
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/gone", root);
    assert_int_equal(symlink("nowhere", path), 0);
    snprintf(path, sizeof path, "%s/c0/l1", root);
    assert_int_equal(symlink("l2", path), 0);
    snprintf(path, sizeof path, "%s/c0/l2", root);
    assert_int_equal(symlink("l1", path), 0);
    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 2);
    assert_int_equal(f->nnotes, 3);
    int seen = 0;
    for (int i = 0; i < f->nnotes; i++) {
        const char *m = f->notes[i].msg;
        assert_int_equal(f->notes[i].lost, 0);
        assert_non_null(strstr(m, "cannot stat: "));
        seen |= (strstr(m, "c0/gone: ") && strstr(m, "No such file")) << 0;
        seen |= (strstr(m, "c0/l1: ") && strstr(m, "symbolic links")) << 1;
        seen |= (strstr(m, "c0/l2: ") && strstr(m, "symbolic links")) << 2;
    }
    assert_int_equal(seen, 7);
    sl__folder_free(f);
    tu_rmtree(root);
    free(root);
}

static void test_escape(void **state)
{
    (void)state;
    char buf[64];
    snprintf(buf, sizeof buf, "a\x1b[2K\rfake\nb\x7f.jpg é");
    sl__msg_escape(buf, sizeof buf);
    assert_string_equal(buf, "a\\x1b[2K\\x0dfake\\x0ab\\x7f.jpg é");
    snprintf(buf, sizeof buf, "plain ütf-8");
    sl__msg_escape(buf, sizeof buf);
    assert_string_equal(buf, "plain ütf-8");
    /* What no longer fits is cut, never inside an escape. */
    char small[8];
    snprintf(small, sizeof small, "ab\ncd");
    sl__msg_escape(small, sizeof small);
    assert_string_equal(small, "ab\\x0ac");
    snprintf(small, sizeof small, "abcd\n");
    sl__msg_escape(small, sizeof small);
    assert_string_equal(small, "abcd");
    char *d = sl__msg_escape_dup("\t\x01");
    assert_string_equal(d, "\\x09\\x01");
    free(d);
}

/* JSON: quotes, backslashes and controls escaped, UTF-8 kept, and each
 * byte that is not UTF-8 as the text \xNN, so a file name that is not
 * UTF-8 still gives valid JSON for every parser. */
static void test_json_escape(void **state)
{
    (void)state;
    struct {
        const char *in, *want;
    } c[] = {
        {"plain é 𝄞 ok", "plain é 𝄞 ok"},
        {"q\"b\\s\n\x1b\x7f", "q\\\"b\\\\s\\u000a\\u001b\\u007f"},
        {"latin1 \xe9t\xe9.jpg", "latin1 \\\\xe9t\\\\xe9.jpg"},
        {"\xc0\xaf overlong", "\\\\xc0\\\\xaf overlong"},
        {"\xed\xa0\x80 surrogate", "\\\\xed\\\\xa0\\\\x80 surrogate"},
        {"\xf4\x90\x80\x80 >10FFFF", "\\\\xf4\\\\x90\\\\x80\\\\x80 >10FFFF"},
        {"cut \xe2\x82", "cut \\\\xe2\\\\x82"},
        {"\xff", "\\\\xff"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char *d = sl__json_escape_dup(c[i].in);
        assert_non_null(d);
        assert_string_equal(d, c[i].want);
        free(d);
    }
    /* Appended to a buffer, cut to fit and counted (the first pass). */
    char buf[6];
    sl__sbuf_t b = {.buf = buf, .cap = sizeof buf};
    buf[0] = 0;
    sl__json_escape(&b, "ab\xff");
    assert_int_equal(b.need, 7);
    assert_string_equal(buf, "ab\\\\x");
}

/* A file named with ESC, CR and LF: every message naming it (a skip, the
 * fail policy's error, a bad entry noted at open) has them escaped. */
static void test_control_bytes_in_names(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fl-ctl", 1, 2, 20, 20);
    put(root, "c0/a\x1b[2K\rfake line\nb.jpg", "not an image");
    const char *esc = "c0/a\\x1b[2K\\x0dfake line\\x0ab.jpg";

    sl_options_t o = opts(SL_ON_ERROR_SKIP);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t n = 0;
    tu_stream_digest(l, &n);
    assert_int_equal(n, 2);
    assert_int_equal(sl_loader_skipped_count(l), 1);
    const char *m = sl_loader_skipped_message(l, 0);
    assert_non_null(strstr(m, esc));
    assert_false(has_control_byte(m));
    sl_loader_destroy(l);

    o = opts(SL_ON_ERROR_FAIL);
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0)
        sl_loader_release(l, b);
    assert_int_not_equal(rc, SL_EEND);
    m = sl_loader_last_error(l);
    assert_non_null(strstr(m, esc));
    assert_false(has_control_byte(m));
    sl_loader_destroy(l);

    /* Noted at open (a FIFO), and the open's own error. */
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/p\x1b]0;x\x07.jpg", root);
    assert_int_equal(mkfifo(path, 0600), 0);
    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), SL_EIO);
    assert_non_null(strstr(err, "c0/p\\x1b]0;x\\x07.jpg: not a regular"));
    assert_false(has_control_byte(err));
    assert_int_equal(sl__folder_scan(root, 1, &f, err, sizeof err), 0);
    assert_int_equal(f->nnotes, 1);
    assert_non_null(strstr(f->notes[0].msg, "c0/p\\x1b]0;x\\x07.jpg"));
    sl__folder_free(f);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* A run of many epochs (as sluice.Loader starts the engine) read only
 * through epoch 0: the batches read ahead into epoch 1 held skips that
 * were counted as they were decoded (stats said 11 of 8, skipped() listed
 * "epoch 1: ..."). Skips count when their batch is handed out. */
static void test_skips_counted_when_handed_out(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fl-ahead", 2, 4, 20, 20);
    char rel[64];
    for (int i = 0; i < 8; i++) {
        snprintf(rel, sizeof rel, "c0/zbad%d.jpg", i); /* after i00..i03 */
        put(root, rel, "not an image");
    }
    sl_options_t o = opts(SL_ON_ERROR_SKIP);
    o.batch_size = 8;
    o.epochs = 1000;
    o.prefetch = 8; /* read-ahead well into epoch 1 */
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t nb = sl_loader_batches_per_epoch(l);
    assert_int_equal(nb, 2); /* 16 samples: 4 skips in each batch */
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int64_t samples = 0;
    for (int64_t i = 0; i < nb; i++) {
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_int_equal(b->epoch, 0);
        samples += b->n;
        sl_loader_release(l, b);
    }
    assert_int_equal(samples, 8);
    usleep(300 * 1000); /* the read-ahead decodes epoch 1 meanwhile */
    sl_stats_t st;
    sl_stats_init(&st);
    assert_int_equal(sl_loader_stats(l, &st), 0);
    assert_int_equal(st.errors_skipped, 8);
    assert_int_equal(sl_loader_skipped_count(l), 8);
    for (int i = 0; i < 8; i++) { /* in slot order */
        char want[64];
        snprintf(want, sizeof want, "c0/zbad%d.jpg: ", i);
        const char *m = sl_loader_skipped_message(l, i);
        assert_int_equal(strncmp(m, "epoch 0: ", 9), 0);
        assert_non_null(strstr(m, want));
    }
    /* A restart drops what was read ahead; epoch 1's skips count once,
     * when its batches are handed out. */
    sl_position_t pos = {1, 0};
    assert_int_equal(sl_loader_start(l, &pos), 0);
    for (int64_t i = 0; i < nb; i++) {
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_int_equal(b->epoch, 1);
        sl_loader_release(l, b);
    }
    usleep(100 * 1000);
    assert_int_equal(sl_loader_stats(l, &st), 0);
    assert_int_equal(st.errors_skipped, 16);
    assert_int_equal(sl_loader_skipped_count(l), 16);
    assert_int_equal(strncmp(sl_loader_skipped_message(l, 8), "epoch 1: ", 9),
                     0);
    sl_loader_destroy(l);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_formats),
        cmocka_unit_test(test_empty_class_folders),
        cmocka_unit_test(test_path_max_folder),
        cmocka_unit_test(test_path_max_file),
        cmocka_unit_test(test_unstattable_entry),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_control_bytes_in_names),
        cmocka_unit_test(test_skips_counted_when_handed_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
