/* telemetry/prom: the latest snapshot in Prometheus text exposition format
 * (version 0.0.4) over HTTP, served by libmicrohttpd on 127.0.0.1. */
#ifndef SL_PROM_H
#define SL_PROM_H

#include <stddef.h>

typedef struct sl__prom sl__prom_t;
struct sl__collector;

int sl__prom_start(int port, struct sl__collector *c, sl__prom_t **out,
                   char *err, size_t errlen);
void sl__prom_stop(sl__prom_t *p); /* NULL ok */

#endif
