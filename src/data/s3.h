/* data/s3: what an s3:// URL needs besides HTTP: credentials and region
 * (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
 * AWS_REGION / AWS_DEFAULT_REGION, else the profile AWS_PROFILE or
 * "default" of AWS_SHARED_CREDENTIALS_FILE / ~/.aws/credentials and
 * AWS_CONFIG_FILE / ~/.aws/config; none at all: unsigned requests, for
 * public buckets), the endpoint (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL /
 * the profile's endpoint_url: path-style ENDPOINT/BUCKET/KEY, as local
 * servers want; else https://BUCKET.s3.REGION.amazonaws.com/KEY), and
 * ListObjectsV2's XML, parsed by libxml2. Signing itself is libcurl's
 * (CURLOPT_AWS_SIGV4, data/remote.c). Depends on base,
 * data/remote_parse, libxml2. */
#ifndef SL_S3_H
#define SL_S3_H

#include <stddef.h>

typedef struct sl__s3_auth {
    char region[64];
    char endpoint[512]; /* without a trailing '/'; "" for AWS */
    char key[256];      /* "" for unsigned requests */
    char secret[256];
    char token[4096]; /* "" without a session token */
} sl__s3_auth_t;

/* Fills a from the environment and the AWS files. @return 0, or
 * SL_EINVAL with a message (a key without its secret). */
int sl__s3_auth_load(sl__s3_auth_t *a, char *err, size_t errlen);

/* s3://BUCKET/KEY as an http(s) URL under a's endpoint (the key
 * percent-encoded, '/' kept), into a malloc'd *out. With list set, the
 * bucket's ListObjectsV2 URL for prefix KEY instead, continuing after
 * token (NULL for the first page). @return 0, SL_EINVAL (not
 * s3://BUCKET/...), SL_ENOMEM. */
int sl__s3_url(const char *s3url, const sl__s3_auth_t *a, int list,
               const char *token, char **out, char *err, size_t errlen);

/* One ListObjectsV2 page (n bytes of XML): its keys appended to *keys
 * (*nkeys of them, capacity *cap; sl__strv_free), *truncated, and the
 * continuation token (malloc'd, or NULL). @return 0, SL_ECORRUPT (not a
 * listing; message names what is wrong), SL_ENOMEM. */
int sl__s3_list_parse(const char *xml, size_t n, char ***keys, int *nkeys,
                      size_t *cap, int *truncated, char **token, char *err,
                      size_t errlen);

/* An S3 error body (<Error><Code>..</Code><Message>..</Message>): "Code:
 * Message" into out, or "" when n bytes are not one. */
void sl__s3_error_text(const char *xml, size_t n, char *out, size_t outlen);

#endif
