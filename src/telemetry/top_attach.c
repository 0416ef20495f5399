/* sluice top's reach: one scrape, the decisions beside it, a pid's port. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "top.h"

int sl__top_scrape(const sl__url_t *u, int timeout_ms, sl__prom_set_t *out,
                   char *err, size_t errlen)
{
    char *body = NULL;
    size_t n = 0;
    int rc = sl__http_get(u, timeout_ms, &body, &n, err, errlen);
    if (rc)
        return rc;
    char why[200];
    rc = sl__promtext_parse(body, n, out, why, sizeof why);
    free(body);
    if (rc)
        return sl__fail(err, errlen, rc, "http://%s:%d%s: %s", u->host, u->port,
                        u->path, why);
    return 0;
}

int sl__top_decisions_url(const sl__url_t *metrics, sl__url_t *out)
{
    static const char m[] = "metrics", d[] = "decisions";
    size_t n = strlen(metrics->path);
    if (n < sizeof m - 1 || strcmp(metrics->path + n - (sizeof m - 1), m) ||
        n - (sizeof m - 1) + sizeof d > sizeof out->path)
        return -1;
    *out = *metrics;
    memcpy(out->path + n - (sizeof m - 1), d, sizeof d);
    return 0;
}

int sl__top_attach_pid(int pid, int timeout_ms, sl__url_t *out, char *err,
                       size_t errlen)
{
    int ports[64];
    int n = sl__pid_listen_ports(pid, ports, 64, err, errlen);
    if (n < 0)
        return n;
    sl__prom_set_t set = {0};
    for (int i = 0; i < n; i++) {
        sl__url_t u = {"127.0.0.1", ports[i], "/metrics"};
        char e[256];
        /* Another server of the process may answer anything: only a
         * parse with the sluice counter in it is the endpoint. */
        if (sl__top_scrape(&u, timeout_ms, &set, e, sizeof e) == 0 &&
            sl__prom_find(&set, "sluice_samples_total", NULL, NULL)) {
            sl__prom_set_free(&set);
            *out = u;
            return 0;
        }
    }
    sl__prom_set_free(&set);
    return sl__fail(err, errlen, SL_ENOTFOUND,
                    "process %d serves no sluice metrics on 127.0.0.1 (%d "
                    "listening port%s tried): was it started with a metrics "
                    "port (sluice run --metrics-port P, metrics_port=P)?",
                    pid, n, n == 1 ? "" : "s");
}
