/* data/remote_req: one HTTP request's rules, shared by the blocking path
 * (data/remote.c: an easy handle per thread) and the multi interface
 * (data/remote_multi.c: many requests in flight from one thread), so each
 * rule is written once: how a request is set up (range, timeouts, stall
 * limit, SigV4), how its outcome is judged (done, worth a retry, failed,
 * and why), how long to back off before retry k, and the final message
 * naming the URL. Internal to data/remote*; needs libcurl. */
#ifndef SL_REMOTE_REQ_H
#define SL_REMOTE_REQ_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "remote.h"
#include "s3.h"

#define SL__REMOTE_ERRBODY 1024 /* of an error response, kept for messages */

struct sl__remote {
    char *name;  /* the URL as printed (sl__remote_redact): every message
                  * starts with it */
    char *given; /* the URL as given */
    char *url;   /* what is requested (s3: under the endpoint) */
    int s3;
    sl__s3_auth_t auth;
    uint64_t size;
};

/* What one attempt receives. */
typedef struct sl__xfer {
    uint8_t *buf;          /* a ranged read: exactly len bytes here, */
    const sl__rseg_t *seg; /* or, when set, scattered over nseg pieces */
    int nseg;
    int si;            /* the piece the next byte goes to */
    size_t so;         /* and its place in it */
    size_t len;        /* (and the whole object when whole) */
    int whole;         /* the range is the whole object: a 200 will do */
    sl__bytes_t *grow; /* a whole GET: appended, at most max */
    size_t max;
    size_t got;
    long status;  /* of the last status line */
    int overflow; /* more bytes than asked for */
    int norange;  /* a 200 to a ranged request */
    int have_cr, have_cl;
    uint64_t cr_first, cr_last, cr_total, cl;
    char errbody[SL__REMOTE_ERRBODY];
    size_t errn;
} sl__xfer_t;

/* An attempt's state that must outlive curl's work on it. */
typedef struct sl__attempt {
    char ebuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs;
    long deadline_ms; /* CURLOPT_TIMEOUT_MS */
} sl__attempt_t;

enum { SL__RQ_DONE, SL__RQ_RETRY, SL__RQ_FAIL };

/* Settings from the environment (read once; any thread). 0, or SL_ESYSTEM
 * when libcurl did not initialise. */
int sl__remote_init(char *err, size_t errlen);
int sl__remote_retries(void);
/* The pause before retry k + 1 (k = 0, 1, ...): exponential, capped. */
long sl__remote_backoff_ms(int k);

/* Sets h up (fresh or reset) for one attempt of r's request: HEAD when
 * head, else bytes [off, off + len) (len 0 with x->grow: the whole
 * object), received into x. 0, or SL__RQ_FAIL with *code and why. */
int sl__remote_setup(CURL *h, const sl__remote_t *r, const char *url, int head,
                     uint64_t off, size_t len, sl__xfer_t *x, sl__attempt_t *at,
                     int *code, char *why, size_t whylen);
/* The attempt ended with cc: the secret and headers leave the handle, and
 * the verdict: SL__RQ_DONE, _RETRY or _FAIL with *code and why. */
int sl__remote_judge(CURL *h, CURLcode cc, const sl__remote_t *r, int head,
                     uint64_t off, size_t len, sl__xfer_t *x, sl__attempt_t *at,
                     int *code, char *why, size_t whylen);
/* The final error after k retries: "NAME: WHAT: WHY (after k retries)". */
int sl__remote_fail(char *err, size_t errlen, int code, const char *name,
                    const char *what, const char *why, int k);
/* "bytes A-B" for the range [off, off + len), len > 0. */
void sl__remote_what(char *what, size_t n, uint64_t off, size_t len);

#endif
