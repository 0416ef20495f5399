/* Many ranged reads in flight from one thread: see remote_multi.h. A read
 * is one attempt at a time in the multi handle; a failed attempt that the
 * rules (remote_req.h) call worth a retry waits in `waiting` until its
 * backoff has passed, then runs again; the outcome goes to `done`, in the
 * order the reads ended, until complete hands it back. */
#include "remote_multi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote_req.h"

#define SPARE_MAX 64 /* easy handles kept for the next reads */
/* Connections to one host at once (HTTP/1.1: one request each); more
 * reads wait inside libcurl for a free one. */
#define HOST_CONNS 64

typedef struct req {
    sl__remote_t *r;
    uint64_t off;
    size_t len;
    uint8_t *buf;
    const sl__rseg_t *seg; /* scattered (readv), nseg pieces */
    int nseg;
    int retries; /* at most this many */
    void *user;
    char *err;
    size_t errlen;
    CURL *h;     /* the attempt running (NULL: waiting or done) */
    int k;       /* retries so far */
    int64_t due; /* waiting: the next attempt's time */
    int rc;
    sl__xfer_t x;
    sl__attempt_t at;
    char why[1200];
    struct req *next; /* in running, waiting or done */
} req_t;

struct sl__rmulti {
    CURLM *m;
    int pending;
    req_t *running, *waiting, *done, *done_tail;
    CURL *spare[SPARE_MAX];
    int nspare;
};

int sl__rmulti_open(sl__rmulti_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = sl__remote_init(err, errlen);
    if (rc)
        return rc;
    sl__rmulti_t *m = calloc(1, sizeof *m);
    if (!m || !(m->m = curl_multi_init())) {
        free(m);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory (curl multi)");
    }
    curl_multi_setopt(m->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)HOST_CONNS);
    *out = m;
    return 0;
}

int sl__rmulti_pending(const sl__rmulti_t *m)
{
    return m->pending;
}

static void unlink_req(req_t **list, req_t *q)
{
    for (req_t **pp = list; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            return;
        }
}

static void push_done(sl__rmulti_t *m, req_t *q)
{
    q->next = NULL;
    if (m->done_tail)
        m->done_tail->next = q;
    else
        m->done = q;
    m->done_tail = q;
}

/* The read is over with code (0: its bytes are in buf). */
static void finish(sl__rmulti_t *m, req_t *q, int code)
{
    q->rc = code;
    if (code) {
        char what[80];
        sl__remote_what(what, sizeof what, q->off, q->len);
        sl__remote_fail(q->err, q->errlen, code, q->r->name, what, q->why,
                        q->k);
    }
    push_done(m, q);
}

/* q's handle back to the spares (out of the multi when in), reset: no
 * secret, header list or buffer is left in it. */
static void release(sl__rmulti_t *m, req_t *q, int in_multi)
{
    CURL *h = q->h;
    q->h = NULL;
    if (in_multi)
        curl_multi_remove_handle(m->m, h);
    unlink_req(&m->running, q);
    curl_easy_reset(h);
    curl_slist_free_all(q->at.hdrs);
    q->at.hdrs = NULL;
    if (m->nspare < SPARE_MAX)
        m->spare[m->nspare++] = h;
    else
        curl_easy_cleanup(h);
}

/* Starts q's next attempt (or ends q when it cannot start). */
static void launch(sl__rmulti_t *m, req_t *q)
{
    CURL *h = m->nspare ? m->spare[--m->nspare] : curl_easy_init();
    int code = SL_ENOMEM;
    if (!h) {
        snprintf(q->why, sizeof q->why, "out of memory (curl handle)");
        finish(m, q, code);
        return;
    }
    q->x = (sl__xfer_t){.buf = q->buf,
                        .seg = q->seg,
                        .nseg = q->nseg,
                        .len = q->len,
                        .whole = q->off == 0 && q->len == q->r->size};
    q->h = h;
    q->next = m->running;
    m->running = q;
    if (sl__remote_setup(h, q->r, q->r->url, 0, q->off, q->len, &q->x, &q->at,
                         &code, q->why, sizeof q->why)) {
        release(m, q, 0);
        finish(m, q, code);
        return;
    }
    curl_easy_setopt(h, CURLOPT_PRIVATE, q);
    if (curl_multi_add_handle(m->m, h) != CURLM_OK) {
        release(m, q, 0);
        snprintf(q->why, sizeof q->why, "out of memory (curl multi)");
        finish(m, q, SL_ENOMEM);
    }
}

static int start(sl__rmulti_t *m, const req_t *as)
{
    req_t *q = calloc(1, sizeof *q);
    if (!q)
        return SL_ENOMEM;
    *q = *as;
    m->pending++;
    launch(m, q);
    return 0;
}

int sl__rmulti_read(sl__rmulti_t *m, sl__remote_t *r, uint64_t off, void *buf,
                    size_t len, void *user, char *err, size_t errlen)
{
    return start(m, &(req_t){.r = r,
                             .off = off,
                             .len = len,
                             .buf = buf,
                             .retries = sl__remote_retries(),
                             .user = user,
                             .err = err,
                             .errlen = errlen});
}

int sl__rmulti_readv(sl__rmulti_t *m, sl__remote_t *r, uint64_t off,
                     const sl__rseg_t *seg, int nseg, int retries, void *user,
                     char *err, size_t errlen)
{
    size_t len = 0;
    for (int i = 0; i < nseg; i++)
        len += seg[i].len;
    int most = sl__remote_retries();
    return start(
        m, &(req_t){.r = r,
                    .off = off,
                    .len = len,
                    .seg = seg,
                    .nseg = nseg,
                    .retries = retries >= 0 && retries < most ? retries : most,
                    .user = user,
                    .err = err,
                    .errlen = errlen});
}

/* An attempt ended: done, failed, or waiting for its retry. */
static void ended(sl__rmulti_t *m, req_t *q, CURLcode cc)
{
    int code = SL_EIO;
    int v = sl__remote_judge(q->h, cc, q->r, 0, q->off, q->len, &q->x, &q->at,
                             &code, q->why, sizeof q->why);
    release(m, q, 1);
    if (v == SL__RQ_DONE) {
        finish(m, q, 0);
    } else if (v == SL__RQ_FAIL || q->k >= q->retries) {
        finish(m, q, code);
    } else {
        q->due = sl__now_ns() + sl__remote_backoff_ms(q->k) * 1000000LL;
        q->k++;
        q->next = m->waiting;
        m->waiting = q;
    }
}

/* Retries whose backoff has passed start again; returns the time until
 * the next one is due (INT64_MAX: none waits). */
static int64_t due_retries(sl__rmulti_t *m)
{
    int64_t now = sl__now_ns(), next = INT64_MAX;
    req_t **pp = &m->waiting;
    while (*pp) {
        req_t *q = *pp;
        if (q->due <= now) {
            *pp = q->next;
            launch(m, q);
            continue;
        }
        if (q->due - now < next)
            next = q->due - now;
        pp = &q->next;
    }
    return next;
}

static void step(sl__rmulti_t *m)
{
    int running, left;
    curl_multi_perform(m->m, &running);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m->m, &left)))
        if (msg->msg == CURLMSG_DONE) {
            req_t *q = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            if (q)
                ended(m, q, msg->data.result);
        }
}

int sl__rmulti_complete(sl__rmulti_t *m, void **user, int *rc,
                        int64_t timeout_ns)
{
    int64_t end = sl__now_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    for (int first = 1;; first = 0) {
        if (m->done) {
            req_t *q = m->done;
            if (!(m->done = q->next))
                m->done_tail = NULL;
            *user = q->user;
            *rc = q->rc;
            m->pending--;
            free(q);
            return 1;
        }
        if (!m->pending)
            return 0;
        int64_t next = due_retries(m);
        step(m);
        if (m->done)
            continue;
        int64_t left = end - sl__now_ns();
        if (left <= 0 && !first)
            return 0;
        if (left <= 0)
            left = 0;
        if (next < left)
            left = next;
        /* Rounded up: a wait of 0 ms would spin until the deadline. */
        curl_multi_poll(m->m, NULL, 0, (int)((left + 999999) / 1000000), NULL);
        if (left == 0 && !m->done) {
            step(m);
            if (!m->done)
                return 0;
        }
    }
}

void sl__rmulti_cancel(sl__rmulti_t *m)
{
    while (m->running || m->waiting) {
        req_t *q = m->running ? m->running : m->waiting;
        if (q->h)
            release(m, q, 1);
        else
            unlink_req(&m->waiting, q);
        snprintf(q->why, sizeof q->why, "stopped");
        finish(m, q, SL_EIO);
    }
}

void sl__rmulti_close(sl__rmulti_t *m)
{
    if (!m)
        return;
    sl__rmulti_cancel(m);
    while (m->done) {
        req_t *q = m->done;
        m->done = q->next;
        free(q);
    }
    for (int i = 0; i < m->nspare; i++)
        curl_easy_cleanup(m->spare[i]);
    curl_multi_cleanup(m->m);
    free(m);
}
