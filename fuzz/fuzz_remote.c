/* Fuzz target: the outside bytes data/remote reads (data/remote_parse,
 * data/s3): any bytes as an HTTP header line (Content-Range,
 * Content-Length), as an INI file (~/.aws/credentials, config), and, in a
 * build with libcurl, as a ListObjectsV2 page and an S3 error body (libxml2
 * under our options). A parsed Content-Range must be consistent; nothing
 * may crash, leak or read out of bounds. Seed corpus: fuzz/corpus/
 * fuzz_remote/ (real S3 listings and errors, header lines, AWS files). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "data/remote_parse.h"
#include "data/s3.h"
#include "sluice/version.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    const char *v;
    size_t vlen;
    uint64_t a, b, c;
    if (sl__http_header(p, size, "Content-Range", &v, &vlen) &&
        !sl__http_content_range(v, vlen, &a, &b, &c) &&
        ((a != UINT64_MAX && a > b) ||
         (c != UINT64_MAX && b != UINT64_MAX && b >= c)))
        abort();
    if (sl__http_header(p, size, "Content-Length", &v, &vlen))
        (void)sl__http_u64(v, vlen, &a);
    (void)sl__http_content_range(p, size, &a, &b, &c);
    char out[256];
    (void)sl__ini_get(p, size, "default", "aws_access_key_id", out, sizeof out);
    (void)sl__ini_get(p, size, "profile x", "region", out, sizeof out);
#if SL_HAVE_CURL
    char **keys = NULL, *token = NULL, err[256];
    int n = 0, trunc;
    size_t cap = 0;
    (void)sl__s3_list_parse(p, size, &keys, &n, &cap, &trunc, &token, err,
                            sizeof err);
    sl__strv_free(keys, n);
    free(token);
    sl__s3_error_text(p, size, out, sizeof out);
#endif
    free(p);
    return 0;
}
