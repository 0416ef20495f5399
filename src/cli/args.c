/* cli/args: command-line pieces more than one command takes: sizes
 * ("4096", "64K", "256M", "1G", "2T"; binary units, an optional trailing
 * "B" or "iB": "256MB", "256MiB") and the "[--FLAG] OPERAND" form. */
#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>

#include "cli.h"

long long sl__parse_size(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    long long v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        int d = *s - '0';
        if (v > (LLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    int shift = 0;
    switch (toupper((unsigned char)*s)) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        s++;
        if (*s == 'i')
            s++;
    }
    if (toupper((unsigned char)*s) == 'B')
        s++;
    if (*s)
        return -1;
    if (v > (LLONG_MAX >> shift))
        return -1;
    return v << shift;
}

int sl__args_flag_operand(int argc, char **argv, const char *flag,
                          void (*usage)(void), int *flag_set)
{
    const struct option opts[] = {
        {flag, no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    *flag_set = 0;
    optind = 0; /* GNU: full re-initialisation */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c != 'f') {
            usage();
            return c == 'h' ? 0 : 2;
        }
        *flag_set = 1;
    }
    if (argc - optind != 1) {
        usage();
        return 2;
    }
    return -1;
}
