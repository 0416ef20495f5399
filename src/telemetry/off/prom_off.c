/* telemetry/off/prom_off: the metrics endpoint of a build configured with
 * -DSL_PROMETHEUS=OFF (cmake/SluiceComponents.cmake), which does not
 * compile prom.c and so needs no libmicrohttpd. Asking for a port
 * (sl_options_t.metrics_port, `sluice run --metrics-port`) fails with
 * SL_EUNSUPPORTED; telemetry without a port works as in any build. */
#include "base/base.h"
#include "telemetry/prom.h"

int sl__prom_start(int port, struct sl__collector *c, sl__prom_t **out,
                   char *err, size_t errlen)
{
    (void)c;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED,
                    "metrics port %d: sluice was built without the "
                    "Prometheus endpoint (configured with "
                    "-DSL_PROMETHEUS=OFF; it needs libmicrohttpd)",
                    port);
}

void sl__prom_stop(sl__prom_t *p)
{
    (void)p;
}
