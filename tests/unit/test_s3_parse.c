/* data/s3's XML (libxml2 under our options): a ListObjectsV2 page parsed;
 * bodies in a broken or foreign encoding refused as not a listing, and
 * nothing written to the process's stderr, which is the user's (the
 * fuzz campaign found libxml2 reporting encoding errors there: S3 sends
 * UTF-8, so the parser is told so). And the AWS files read from a FIFO.
 * Skips without libcurl (SL_CURL=OFF). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#if SL_HAVE_CURL
#include "base/alloc.h"
#include "data/s3.h"

static const char page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>b"
    "</Name><IsTruncated>true</IsTruncated><NextContinuationToken>tok=="
    "</NextContinuationToken><Contents><Key>w/a.tar</Key></Contents>"
    "<Contents><Key>w/b.tar</Key></Contents></ListBucketResult>";

/* ISO-2022-JP declared, then bytes it cannot take; and what libxml2
 * guesses is UCS-4. */
static const char iso2022[] = "<?xml version=\"1.0\" encoding=\"ISO-2022-JP\"?>"
                              "<a>\x1b$B\xff\xff</a>";
static const char ucs4[] = {0,   0, 0,      '<',    0,      0,     0,
                            'a', 0, 0,      0,      '>',    0,     0,
                            0,   0, '\xff', '\xff', '\xff', '\xff'};

/* Runs sl__s3_list_parse and sl__s3_error_text on n bytes with stderr
 * sent to a file; returns the list parse's rc, *said the bytes written. */
static int quietly(const char *xml, size_t n, long *said, int *nkeys)
{
    char *dir = tu_tmpdir("s3_parse"), path[4096];
    snprintf(path, sizeof path, "%s/stderr", dir);
    fflush(stderr);
    int keep = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(keep >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    char **keys = NULL, *token = NULL, err[256], out[256];
    int trunc = 0;
    size_t cap = 0;
    *nkeys = 0;
    int rc = sl__s3_list_parse(xml, n, &keys, nkeys, &cap, &trunc, &token, err,
                               sizeof err);
    sl__s3_error_text(xml, n, out, sizeof out);
    fflush(stderr);
    dup2(keep, 2);
    close(keep);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    *said = (long)st.st_size;
    sl__strv_free(keys, *nkeys);
    free(token);
    unlink(path);
    rmdir(dir);
    free(dir);
    return rc;
}

static void test_a_page_is_parsed(void **state)
{
    (void)state;
    long said;
    int n;
    assert_int_equal(quietly(page, sizeof page - 1, &said, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(said, 0);
}

static void test_a_broken_encoding_is_refused_quietly(void **state)
{
    (void)state;
    long said;
    int n;
    assert_int_equal(quietly(iso2022, sizeof iso2022 - 1, &said, &n),
                     SL_ECORRUPT);
    assert_int_equal(said, 0);
    assert_int_equal(quietly(ucs4, sizeof ucs4, &said, &n), SL_ECORRUPT);
    assert_int_equal(said, 0);
}

/* Closes the FIFO's writer after a moment: the reader has its bytes by
 * then and sees the end instead of waiting out its 5 s. */
static void *close_later(void *arg)
{
    usleep(200 * 1000);
    close(*(int *)arg);
    return NULL;
}

/* A credentials FIFO with no writer at the first URL (a writer loop
 * between two writes) gives no key then, and is read again at the next
 * URL: its emptiness was kept for the process, every later URL unsigned. */
static void test_a_credentials_fifo_empty_once_is_read_again(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("s3fifo"), path[4200], err[512] = "";
    snprintf(path, sizeof path, "%s/credentials", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_PROFILE");
    sl__s3_auth_t *a = malloc(sizeof *a);
    assert_int_equal(sl__s3_auth_load(a, err, sizeof err), 0);
    assert_string_equal(a->key, ""); /* no writer: unsigned, at once */
    /* a writer now: O_RDWR opens without waiting for a reader, and holds
     * the bytes in the FIFO until one comes */
    static const char creds[] = "[default]\naws_access_key_id = AKIDFIFO\n"
                                "aws_secret_access_key = s3cr3t\n";
    int w = open(path, O_RDWR);
    assert_true(w >= 0);
    assert_int_equal(write(w, creds, sizeof creds - 1), sizeof creds - 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, close_later, &w), 0);
    assert_int_equal(sl__s3_auth_load(a, err, sizeof err), 0);
    pthread_join(t, NULL);
    assert_string_equal(a->key, "AKIDFIFO");
    assert_string_equal(a->secret, "s3cr3t");
    /* and kept: the pipe gave its bytes once */
    assert_int_equal(sl__s3_auth_load(a, err, sizeof err), 0);
    assert_string_equal(a->key, "AKIDFIFO");
    free(a);
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unsetenv("AWS_CONFIG_FILE");
    unlink(path);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_page_is_parsed),
        cmocka_unit_test(test_a_broken_encoding_is_refused_quietly),
        cmocka_unit_test(test_a_credentials_fifo_empty_once_is_read_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    puts("SKIP: built without libcurl (SL_CURL=OFF)");
    return 77;
}
#endif
