/* Fuzz target: what `sluice top` reads from outside, any bytes through
 * each reader: an HTTP reply (status, headers), the Prometheus text of
 * /metrics and /decisions (then the frame made of it and drawn on a small
 * and a large screen), a URL, and a /proc/PID/net/tcp table. Nothing may
 * crash or read past the bytes; a drawn frame keeps to its width and
 * height. The seed corpus is a real scrape of `sluice run --metrics-port`,
 * its /decisions, a net/tcp table and edge cases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/promtext.h"
#include "telemetry/scrape.h"
#include "telemetry/top.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_screen(const char *t, int width, int height)
{
    int lines = 0;
    for (const char *p = t; *p; lines++) {
        const char *nl = strchr(p, '\n');
        if (!nl || nl - p > width)
            abort();
        for (const char *q = p; q < nl; q++)
            if (*q < 0x20 || *q > 0x7e)
                abort();
        p = nl + 1;
    }
    if (lines > height)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    char err[256];
    int status;
    size_t off;
    if (sl__http_reply_parse(t, size, &status, &off, err, sizeof err) == 0 &&
        off > size)
        abort();
    sl__prom_set_t set = {0};
    if (sl__promtext_parse(t, size, &set, err, sizeof err) == 0) {
        static sl__top_frame_t f;
        sl__top_frame_make(&set, &set, &set, &f);
        static char screen[1 << 16];
        int sizes[][2] = {{20, 4}, {200, 60}};
        for (int i = 0; i < 2; i++) {
            int need = sl__top_render(&f, "fuzz", sizes[i][0], sizes[i][1],
                                      screen, sizeof screen);
            if (need < 0 || (size_t)need >= sizeof screen)
                abort();
            check_screen(screen, sizes[i][0], sizes[i][1]);
        }
    }
    sl__prom_set_free(&set);
    char *z = malloc(size + 1);
    if (!z)
        return 0;
    memcpy(z, data, size);
    z[size] = 0;
    sl__url_t u;
    (void)sl__url_parse(z, &u, err, sizeof err);
    free(z);
    int ports[64];
    unsigned long inodes[64];
    int n = sl__parse_net_tcp(t, size, ports, inodes, 64);
    for (int i = 0; i < n; i++)
        if (ports[i] < 0 || ports[i] > 65535)
            abort();
    return 0;
}
