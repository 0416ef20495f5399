#include "remote.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/alloc.h"
#include "remote_parse.h"
#include "remote_req.h"
#include "s3.h"
#include "sluice/version.h"

#define LIST_PAGE_MAX (16u << 20) /* one ListObjectsV2 page, bytes */

typedef sl__xfer_t xfer_t;

/* ---- settings (read once from the environment) and per-thread handles */

static struct {
    int retries;
    long backoff_ms, stall_s, connect_s;
    long min_rate; /* bytes/s: a request's deadline (deadline_ms) */
} g_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static int g_init_rc;

static long env_long(const char *var, long dflt, long lo, long hi)
{
    const char *v = getenv(var);
    char *end;
    long x = v && *v ? strtol(v, &end, 10) : dflt;
    return v && *v && (*end || x < lo || x > hi) ? dflt : x;
}

static void free_handle(void *h)
{
    curl_easy_cleanup(h);
}

static void init_once(void)
{
    g_cfg.retries = (int)env_long("SL_HTTP_RETRIES", 5, 0, 100);
    g_cfg.backoff_ms = env_long("SL_HTTP_BACKOFF_MS", 100, 0, 60000);
    g_cfg.stall_s = env_long("SL_HTTP_STALL_S", 10, 1, 3600);
    g_cfg.connect_s = env_long("SL_HTTP_CONNECT_TIMEOUT_S", 10, 1, 3600);
    g_cfg.min_rate = env_long("SL_HTTP_MIN_RATE", 16384, 1, 1L << 30);
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
                pthread_key_create(&g_key, free_handle) != 0;
}

int sl__remote_init(char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    if (g_init_rc)
        return sl__fail(err, errlen, SL_ESYSTEM,
                        "libcurl failed to initialise");
    return 0;
}

int sl__remote_retries(void)
{
    pthread_once(&g_once, init_once);
    return g_cfg.retries;
}

long sl__remote_backoff_ms(int k)
{
    pthread_once(&g_once, init_once);
    long ms = g_cfg.backoff_ms << (k < 10 ? k : 10);
    return ms < 30000 ? ms : 30000;
}

/* This thread's easy handle: kept between requests, so its connections
 * are reused; options reset for each request. */
static CURL *handle(char *err, size_t errlen)
{
    if (sl__remote_init(err, errlen))
        return NULL;
    CURL *h = pthread_getspecific(g_key);
    if (h) {
        curl_easy_reset(h);
    } else if (!(h = curl_easy_init()) || pthread_setspecific(g_key, h)) {
        if (h)
            curl_easy_cleanup(h);
        sl__fail(err, errlen, SL_ENOMEM, "out of memory (curl handle)");
        return NULL;
    }
    return h;
}

/* ---- one request: its rules (remote_req.h) */

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t len = size * n, vlen;
    const char *v;
    if (len > 5 && !strncmp(p, "HTTP/", 5)) { /* a new response */
        const char *sp = memchr(p, ' ', len);
        x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        x->have_cr = x->have_cl = 0;
    } else if (sl__http_header(p, len, "Content-Range", &v, &vlen)) {
        x->have_cr = !sl__http_content_range(v, vlen, &x->cr_first, &x->cr_last,
                                             &x->cr_total);
    } else if (sl__http_header(p, len, "Content-Length", &v, &vlen)) {
        x->have_cl = !sl__http_u64(v, vlen, &x->cl);
    }
    return len;
}

/* len bytes (that fit in x->len) to the pieces, in order. */
static void scatter(xfer_t *x, const char *p, size_t len)
{
    x->got += len;
    while (len && x->si < x->nseg) {
        const sl__rseg_t *g = &x->seg[x->si];
        size_t k = g->len - x->so < len ? g->len - x->so : len;
        if (g->buf)
            memcpy((uint8_t *)g->buf + x->so, p, k);
        p += k;
        len -= k;
        x->so += k;
        if (x->so == g->len) {
            x->si++;
            x->so = 0;
        }
    }
}

/* A 206 whose Content-Length is not its Content-Range's span: libcurl
 * would wait for bytes that never come (or stop short), a stall on every
 * retry; it is the server's fault, so judged at once, not retried. */
static int length_disagrees(const xfer_t *x)
{
    return x->status == 206 && x->have_cr && x->have_cl &&
           x->cr_last != UINT64_MAX && x->cl != x->cr_last - x->cr_first + 1;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t len = size * n;
    if (length_disagrees(x))
        return 0;
    if (x->status < 200 || x->status > 299) { /* an error page: its start */
        size_t room = SL__REMOTE_ERRBODY - 1 - x->errn;
        size_t k = len < room ? len : room;
        memcpy(x->errbody + x->errn, p, k);
        x->errn += k;
        x->errbody[x->errn] = 0;
        return len;
    }
    if (x->grow) {
        if (len > x->max - x->got) {
            x->overflow = 1;
            return 0;
        }
        if (sl__bytes_reserve(x->grow, x->got + len + 1))
            return 0;
        memcpy(x->grow->p + x->got, p, len);
        x->got += len;
        return len;
    }
    if (x->status == 200 && !x->whole) {
        x->norange = 1; /* the whole object where a range was asked for */
        return 0;
    }
    if (len > x->len - x->got) {
        x->overflow = 1;
        return 0;
    }
    if (x->seg) {
        scatter(x, p, len);
        return len;
    }
    memcpy(x->buf + x->got, p, len);
    x->got += len;
    return len;
}

/* Failures worth another try: the network, the server's load, a stall. */
static int transient(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}

/* The whole request's limit, so a server that trickles just above the
 * stall limit cannot hold a read for ever: the time to connect and to get
 * going (the connect and stall limits), then bytes at SL_HTTP_MIN_RATE. */
static long deadline_ms(size_t bytes)
{
    double ms = (double)(g_cfg.connect_s + g_cfg.stall_s) * 1000.0 +
                (double)bytes * 1000.0 / (double)g_cfg.min_rate;
    return ms < 1e9 ? (long)ms : 1000000000L;
}

int sl__remote_setup(CURL *h, const sl__remote_t *r, const char *url, int head,
                     uint64_t off, size_t len, xfer_t *x, sl__attempt_t *at,
                     int *code, char *why, size_t whylen)
{
    char range[64], auth[600], sig[128];
    at->ebuf[0] = 0;
    at->hdrs = NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, g_cfg.connect_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, g_cfg.stall_s);
    at->deadline_ms = deadline_ms(head ? 0 : x->grow ? x->max : len);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, at->deadline_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice/" SL_VERSION_STRING);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, at->ebuf);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (head) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (len) { /* libcurl copies string options */
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1));
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    }
    if (r && r->s3 && r->auth.key[0]) {
        snprintf(sig, sizeof sig, "aws:amz:%s:s3", r->auth.region);
        snprintf(auth, sizeof auth, "%s:%s", r->auth.key, r->auth.secret);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sig);
        curl_easy_setopt(h, CURLOPT_USERPWD, auth);
        memset(auth, 0, sizeof auth);
        /* S3 wants the payload's SHA-256 in this header on every SigV4
         * request (refused without it: SignatureDoesNotMatch); ours are
         * GET/HEAD, so it is the empty body's. libcurl signs it with the
         * other x-amz-* headers and takes the payload hash from it. */
        at->hdrs = curl_slist_append(
            NULL,
            "x-amz-content-sha256: "
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        if (at->hdrs && r->auth.token[0]) {
            char tok[4200];
            snprintf(tok, sizeof tok, "x-amz-security-token: %s",
                     r->auth.token);
            struct curl_slist *l = curl_slist_append(at->hdrs, tok);
            if (!l) {
                curl_slist_free_all(at->hdrs);
                at->hdrs = NULL;
            } else
                at->hdrs = l;
        }
        if (!at->hdrs) {
            *code = SL_ENOMEM;
            snprintf(why, whylen, "out of memory");
            return SL__RQ_FAIL;
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, at->hdrs);
    }
    return 0;
}

int sl__remote_judge(CURL *h, CURLcode cc, const sl__remote_t *r, int head,
                     uint64_t off, size_t len, xfer_t *x, sl__attempt_t *at,
                     int *code, char *why, size_t whylen)
{
    if (r && r->s3) /* the secret is not left in the handle */
        curl_easy_setopt(h, CURLOPT_USERPWD, "");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(at->hdrs);
    at->hdrs = NULL;
    *code = SL_EIO;
    if (x->norange) {
        snprintf(why, whylen,
                 "the server sent the whole object for a range request "
                 "(no Range support)");
        return SL__RQ_FAIL;
    }
    if (x->overflow && x->grow) {
        *code = SL_ERANGE;
        snprintf(why, whylen, "larger than %zu bytes", x->max);
        return SL__RQ_FAIL;
    }
    if (x->overflow) {
        snprintf(why, whylen, "the server sent more than the %zu bytes asked",
                 len);
        return SL__RQ_FAIL;
    }
    if (length_disagrees(x)) {
        snprintf(why, whylen,
                 "Content-Length %llu disagrees with Content-Range %llu-%llu",
                 (unsigned long long)x->cl, (unsigned long long)x->cr_first,
                 (unsigned long long)x->cr_last);
        return SL__RQ_FAIL;
    }
    if (cc == CURLE_OPERATION_TIMEDOUT &&
        !strncmp(at->ebuf, "Operation timed out", 19)) {
        snprintf(why, whylen,
                 "%s (past the request's deadline, %ld ms: "
                 "SL_HTTP_CONNECT_TIMEOUT_S + SL_HTTP_STALL_S + its bytes at "
                 "SL_HTTP_MIN_RATE %ld B/s)",
                 at->ebuf, at->deadline_ms, g_cfg.min_rate);
        return SL__RQ_RETRY;
    }
    if (cc != CURLE_OK) {
        snprintf(why, whylen, "%s",
                 at->ebuf[0] ? at->ebuf : curl_easy_strerror(cc));
        if (cc == CURLE_OUT_OF_MEMORY || (cc == CURLE_WRITE_ERROR && x->grow))
            *code = SL_ENOMEM;
        return transient(cc) ? SL__RQ_RETRY : SL__RQ_FAIL;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299) {
        char s3msg[512] = "";
        if (r && r->s3 && x->errn)
            sl__s3_error_text(x->errbody, x->errn, s3msg, sizeof s3msg);
        snprintf(why, whylen, "HTTP %ld%s%s", status, s3msg[0] ? " " : "",
                 s3msg);
        if (status == 404 || status == 410)
            *code = SL_ENOTFOUND;
        return status >= 500 || status == 408 || status == 429 ? SL__RQ_RETRY
                                                               : SL__RQ_FAIL;
    }
    if (head || x->grow)
        return SL__RQ_DONE;
    if (status == 206 &&
        (!x->have_cr || x->cr_first != off || x->cr_last != off + len - 1)) {
        snprintf(
            why, whylen, "the server answered bytes %llu-%llu for %llu-%llu",
            (unsigned long long)x->cr_first, (unsigned long long)x->cr_last,
            (unsigned long long)off, (unsigned long long)(off + len - 1));
        return SL__RQ_FAIL;
    }
    if (x->got != len) {
        snprintf(why, whylen, "short body: %zu of %zu bytes", x->got, len);
        return SL__RQ_RETRY;
    }
    return SL__RQ_DONE;
}

int sl__remote_fail(char *err, size_t errlen, int code, const char *name,
                    const char *what, const char *why, int k)
{
    if (k)
        return sl__fail(err, errlen, code, "%s: %s: %s (after %d retr%s)", name,
                        what, why, k, k == 1 ? "y" : "ies");
    return sl__fail(err, errlen, code, "%s: %s: %s", name, what, why);
}

void sl__remote_what(char *what, size_t n, uint64_t off, size_t len)
{
    snprintf(what, n, "bytes %llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
}

/* This thread's stop flag (sl__remote_stop_on): a blocking request looks
 * at it from libcurl's progress callback (at least once a second). */
static _Thread_local const atomic_int *t_stop;

void sl__remote_stop_on(const atomic_int *flag)
{
    t_stop = flag;
}

static int stopping(void)
{
    return t_stop && atomic_load(t_stop);
}

static int on_progress(void *arg, curl_off_t dlt, curl_off_t dln,
                       curl_off_t ult, curl_off_t uln)
{
    (void)arg;
    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    return stopping(); /* nonzero: CURLE_ABORTED_BY_CALLBACK */
}

/* One blocking attempt: the rules above around curl_easy_perform. */
static int attempt(const sl__remote_t *r, const char *url, int head,
                   uint64_t off, size_t len, xfer_t *x, int *code, char *why,
                   size_t whylen)
{
    CURL *h = handle(why, whylen);
    if (!h) {
        *code = SL_ESYSTEM;
        return SL__RQ_FAIL;
    }
    sl__attempt_t at;
    if (sl__remote_setup(h, r, url, head, off, len, x, &at, code, why, whylen))
        return SL__RQ_FAIL;
    if (t_stop) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    CURLcode cc = curl_easy_perform(h);
    int res =
        sl__remote_judge(h, cc, r, head, off, len, x, &at, code, why, whylen);
    if (res != SL__RQ_DONE && stopping()) {
        snprintf(why, whylen, "stopped");
        return SL__RQ_FAIL;
    }
    return res;
}

/* A retry's backoff, in slices of at most 50 ms so that a stop (the
 * thread's flag) ends it; returns 1 when stopped. */
static int pause_ms(long ms)
{
    for (;;) {
        if (stopping())
            return 1;
        if (ms <= 0)
            return 0;
        long step = ms < 50 ? ms : 50;
        ms -= step;
        struct timespec ts = {0, step * 1000000L};
        while (nanosleep(&ts, &ts))
            ;
    }
}

/* The request with its retries; the final error names name, what and the
 * cause. */
static int perform(const sl__remote_t *r, const char *url, const char *name,
                   const char *what, int head, uint64_t off, size_t len,
                   xfer_t *proto, char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    char why[1200];
    int code = SL_EIO, k;
    for (k = 0;; k++) {
        xfer_t x = *proto;
        if (x.grow)
            x.grow->n = 0;
        int res = attempt(r, url, head, off, len, &x, &code, why, sizeof why);
        if (res == SL__RQ_DONE) {
            *proto = x;
            return 0;
        }
        if (res == SL__RQ_FAIL || k >= g_cfg.retries) {
            proto->status = x.status;
            break;
        }
        if (pause_ms(sl__remote_backoff_ms(k))) {
            snprintf(why, sizeof why, "stopped");
            break;
        }
    }
    return sl__remote_fail(err, errlen, code, name, what, why, k);
}

/* ---- what is printed of a URL */

/* Query parameters whose values are secrets (presigned URLs: S3's, Azure's
 * SAS "sig", a bearer "token"). */
static const char *const secret_params[] = {
    "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "sig",
    "token"};

/* q (a raw query, "a=1&b=2") with the values of secret_params as "***",
 * into out (as long as q + 3 a parameter); 1 when one was hidden. */
static int redact_query(const char *q, char *out)
{
    int hid = 0;
    while (*q) {
        size_t n = strcspn(q, "&"), k = strcspn(q, "=&");
        int secret = 0;
        for (size_t i = 0;
             k < n && i < sizeof secret_params / sizeof *secret_params; i++)
            secret |= strlen(secret_params[i]) == k &&
                      !strncasecmp(q, secret_params[i], k);
        size_t keep = secret ? k + 1 : n;
        memcpy(out, q, keep);
        out += keep;
        if (secret)
            out += sprintf(out, "***");
        hid |= secret;
        q += n;
        if (*q)
            *out++ = *q++;
    }
    *out = 0;
    return hid;
}

/* Without a parse (a URL libcurl refuses): the userinfo and the whole
 * query hidden by hand. */
static char *redact_crude(const char *url)
{
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen), *q = strchr(url, '?');
    char *out = NULL;
    size_t qn = q ? strlen(q) : 0;
    if (asprintf(&out, "%.*s%s%.*s%s", (int)(auth - url), url, at ? "***" : "",
                 (int)(strlen(at ? at : auth) - qn), at ? at : auth,
                 q ? "?***" : "") < 0)
        return NULL;
    return out;
}

char *sl__remote_redact(const char *url)
{
    CURLU *u = curl_url();
    if (!u)
        return NULL;
    char *part = NULL, *out = NULL, *q2 = NULL;
    int hid = 0, ok = 1;
    if (curl_url_set(u, CURLUPART_URL, url,
                     CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS |
                         CURLU_ALLOW_SPACE) != CURLUE_OK) {
        curl_url_cleanup(u);
        return redact_crude(url);
    }
    if (!curl_url_get(u, CURLUPART_USER, &part, 0)) {
        hid = 1;
        ok &= !curl_url_set(u, CURLUPART_USER, "***", 0) &&
              !curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
        curl_free(part);
        part = NULL;
    }
    if (!curl_url_get(u, CURLUPART_QUERY, &part, 0)) {
        if (!(q2 = malloc(strlen(part) * 2 + 8)))
            ok = 0;
        else if (redact_query(part, q2)) {
            hid = 1;
            ok &= !curl_url_set(u, CURLUPART_QUERY, q2, 0);
        }
        curl_free(part);
        part = NULL;
    }
    if (ok && !hid)
        out = strdup(url); /* nothing to hide: word for word as given */
    else if (ok && !curl_url_get(u, CURLUPART_URL, &part, 0))
        out = strdup(part);
    curl_free(part);
    free(q2);
    curl_url_cleanup(u);
    return out;
}

const char *sl__remote_given(const sl__remote_t *r)
{
    return r->given;
}

const char *sl__remote_name(const sl__remote_t *r)
{
    return r->name;
}

/* ---- the calls */

static int make(const char *url, sl__remote_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl__remote_t *r = calloc(1, sizeof *r);
    /* name: what every message prints, its secrets hidden; given and url:
     * what is requested. */
    if (!r || !(r->name = sl__remote_redact(url)) ||
        !(r->given = strdup(url))) {
        sl__remote_close(r);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    r->s3 = !strncasecmp(url, "s3://", 5);
    if (!sl__remote_is_url(url)) {
        rc = sl__fail(err, errlen, SL_EUNSUPPORTED,
                      "%s: not an http://, https:// or s3:// URL", r->name);
    } else if (!r->s3 && strchr(url, ' ')) {
        rc = sl__fail(err, errlen, SL_EUNSUPPORTED,
                      "%s: a space in a URL: encode spaces as %%20", r->name);
    } else if (r->s3) {
        char why[512];
        if ((rc = sl__s3_auth_load(&r->auth, why, sizeof why)) ||
            (rc = sl__s3_url(url, &r->auth, 0, NULL, &r->url, why, sizeof why)))
            sl__fail(err, errlen, rc, "%s: %s", r->name, why);
    } else if (!(r->url = strdup(url))) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    if (rc) {
        sl__remote_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int sl__remote_open(const char *url, sl__remote_t **out, uint64_t *size,
                    char *err, size_t errlen)
{
    *size = 0;
    sl__remote_t *r;
    int rc = make(url, &r, err, errlen);
    if (rc)
        return rc;
    xfer_t x = {0};
    rc = perform(r, r->url, r->name, "HEAD", 1, 0, 0, &x, err, errlen);
    if (!rc && x.have_cl) {
        r->size = x.cl;
    } else if (!rc || x.status == 405 || x.status == 501 || x.status == 403) {
        /* No length from HEAD, or HEAD not allowed (405, 501; 403: a
         * presigned URL is signed for GET only): the first byte's range
         * says the total. Any other failure is HEAD's to report (a GET
         * after a 500 would only hide its cause). */
        uint8_t b;
        xfer_t y = {.buf = &b, .len = 1};
        rc = perform(r, r->url, r->name, "bytes 0-0", 0, 0, 1, &y, err, errlen);
        if (!rc && (!y.have_cr || y.cr_total == UINT64_MAX))
            rc = sl__fail(err, errlen, SL_EIO,
                          "%s: the server gives no object size "
                          "(Content-Length / Content-Range)",
                          r->name);
        r->size = y.cr_total;
    }
    if (rc) {
        sl__remote_close(r);
        return rc;
    }
    *out = r;
    *size = r->size;
    return 0;
}

int sl__remote_read(sl__remote_t *r, uint64_t off, void *buf, size_t len,
                    char *err, size_t errlen)
{
    if (!len)
        return 0;
    char what[80];
    sl__remote_what(what, sizeof what, off, len);
    xfer_t x = {.buf = buf, .len = len, .whole = off == 0 && len == r->size};
    return perform(r, r->url, r->name, what, 0, off, len, &x, err, errlen);
}

void sl__remote_close(sl__remote_t *r)
{
    if (!r)
        return;
    free(r->name);
    free(r->given);
    free(r->url);
    memset(&r->auth, 0, sizeof r->auth);
    free(r);
}

int sl__remote_get(const char *url, size_t max, sl__bytes_t *out, char *err,
                   size_t errlen)
{
    sl__remote_t *r;
    int rc = make(url, &r, err, errlen);
    if (rc)
        return rc;
    xfer_t x = {.grow = out, .max = max};
    rc = perform(r, r->url, r->name, "GET", 0, 0, 0, &x, err, errlen);
    out->n = rc ? 0 : x.got;
    sl__remote_close(r);
    return rc;
}

int sl__remote_list(const char *url, char ***names, int *n, char *err,
                    size_t errlen)
{
    *names = NULL;
    *n = 0;
    if (strncasecmp(url, "s3://", 5)) {
        char *shown = sl__remote_redact(url);
        sl__fail(err, errlen, SL_EUNSUPPORTED,
                 "%s: only s3:// prefixes can be listed; name the files (a "
                 "brace pattern: shard-{000000..000099}.tar)",
                 shown ? shown : "(a URL)");
        free(shown);
        return SL_EUNSUPPORTED;
    }
    sl__remote_t *r;
    int rc = make(url, &r, err, errlen);
    if (rc)
        return rc;
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    char **keys = NULL, *token = NULL, why[512];
    int nkeys = 0, truncated = 1;
    size_t cap = 0;
    sl__bytes_t page = {0};
    for (int p = 0; truncated && !rc; p++) {
        char *lurl = NULL, what[64];
        snprintf(what, sizeof what, "ListObjectsV2 page %d", p + 1);
        if ((rc =
                 sl__s3_url(url, &r->auth, 1, token, &lurl, why, sizeof why))) {
            sl__fail(err, errlen, rc, "%s: %s", r->name, why);
            break;
        }
        xfer_t x = {.grow = &page, .max = LIST_PAGE_MAX};
        rc = perform(r, lurl, r->name, what, 0, 0, 0, &x, err, errlen);
        free(lurl);
        free(token);
        token = NULL;
        if (!rc &&
            (rc = sl__s3_list_parse((const char *)page.p, x.got, &keys, &nkeys,
                                    &cap, &truncated, &token, why, sizeof why)))
            sl__fail(err, errlen, rc, "%s: %s: %s", r->name, what, why);
    }
    free(token);
    sl__bytes_free(&page);
    /* Keys back to s3:// URLs; "folders" (keys ending in '/') left out. */
    int m = 0;
    for (int i = 0; i < nkeys && !rc; i++) {
        size_t kl = strlen(keys[i]);
        char *u = NULL;
        if (kl && keys[i][kl - 1] == '/') {
            free(keys[i]);
            keys[i] = NULL;
            continue;
        }
        if (asprintf(&u, "s3://%.*s/%s", (int)bl, b, keys[i]) < 0) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            u = NULL;
        }
        free(keys[i]);
        keys[i] = NULL;
        keys[m++] = u;
    }
    if (rc) {
        sl__strv_free(keys, nkeys);
        keys = NULL;
        m = 0;
    } else if (keys) {
        keys[m] = NULL;
    }
    sl__remote_close(r);
    *names = keys;
    *n = m;
    return rc;
}
