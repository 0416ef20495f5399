/* cli/opts: the options of every command, each declared once as a table
 * row (its name, the kind and range of its value, the field it fills, its
 * line of help and the default shown), read by one parser (getopt_long
 * underneath: --name=V, unique prefixes and options among the operands
 * work as before) and one usage printer. A command passes its own table
 * and, when it has one, a shared one (the consumer options of run/bench,
 * the shard output options of the pack commands). */
#ifndef SL_CLI_OPTS_H
#define SL_CLI_OPTS_H

#include <float.h>
#include <getopt.h> /* optind: the first operand after sl__opts_parse */
#include <stddef.h>
#include <stdio.h>

typedef enum sl__opt_kind {
    SL__OPT_FLAG,   /* no value: the int field becomes 1 */
    SL__OPT_UNSET,  /* no value: the int field becomes 0 */
    SL__OPT_INT,    /* int in [lo, hi] */
    SL__OPT_I64,    /* int64_t in [lo, hi] */
    SL__OPT_U64,    /* uint64_t, decimal */
    SL__OPT_DOUBLE, /* double in [lo, hi] */
    SL__OPT_SIZE,   /* int64_t bytes, "4096", "64K", "512M", in [lo, hi] */
    SL__OPT_STR,    /* const char *, the argv string itself */
    SL__OPT_CHOICE, /* int: values[i] for the name choices[i] */
    SL__OPT_CALL,   /* parse(value, field): 0, or -1 for a bad value */
} sl__opt_kind_t;

/* Lowest bound of "> 0" for a double. */
#define SL__OPT_POS DBL_MIN

/* Table rows name the fields they need, in order, and leave the rest
 * (zero): -Wextra would ask for every field of every row. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/** One option. Tables end with a row whose name is NULL. */
typedef struct sl__opt {
    const char *name; /* --name */
    int letter;       /* -x as well, or 0 */
    sl__opt_kind_t kind;
    size_t off;       /* the field, in the struct the table fills */
    double lo, hi;    /* the range of numbers and sizes */
    const char *arg;  /* the value in the usage ("N"); CHOICE: the names */
    const char *help; /* one line */
    const char *dflt; /* the default shown, or NULL */
    const char *const *choices; /* CHOICE: NULL-terminated */
    const int *values;          /* CHOICE: theirs (NULL: the index) */
    int (*parse)(const char *s, void *field); /* CALL */
    int need;                                 /* it must be given */
} sl__opt_t;

/** A command line: what the usage says, and the options. */
typedef struct sl__opts {
    const char *synopsis;      /* after "usage: sluice CMD " */
    const char *about;         /* lines after the synopsis, or NULL */
    const sl__opt_t *table[2]; /* the command's, and a shared one (or NULL) */
    const char *operands;      /* for "expected ...", e.g. "one SOURCE" */
    int min, max;              /* how many operands (max < 0: any number) */
    const char *footer;        /* lines after the options, or NULL */
} sl__opts_t;

/** Parses the options of argv into `own` (the struct of table[0]) and
 *  `shared` (table[1]'s); -h / --help print the usage to stdout. Values are
 * checked as their row says; a bad one is reported as "sluice CMD: bad value
 * 'V' for --X (what it takes)"; an unknown option (with the closest one's
 * name when one is close, or the options an ambiguous prefix names), a
 * missing value or a wrong operand count as sl__opts_bad does, on stderr;
 * a command given nothing at all prints the usage there. @return -1 to go on
 * (the operands are argv[optind..], getopt_long having moved them to the
 * end), or the exit status: 0 after --help, 2 for a bad command line. */
int sl__opts_parse(const sl__opts_t *d, void *own, void *shared, int argc,
                   char **argv);
/** Prints the usage of command `cmd` to f. */
void sl__opts_usage(const sl__opts_t *d, FILE *f, const char *cmd);
/** Prints "sluice CMD: <fmt...>" and "see 'sluice CMD --help'" to stderr (a
 *  bad operand; the usage is long), escaped as sl__cli_error does.
 *  @return 2, the exit status. */
int sl__opts_bad(const sl__opts_t *d, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Prints "sluice CMD: <fmt...>" and a newline to stderr, the message's
 *  control bytes escaped (\x1b, as sl__msg_escape): a file name in it may
 *  hold any byte, and raw ones would drive the terminal. Every command's
 *  error lines, so that all start the same way. */
void sl__cli_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** The distance between a and b: insertions, deletions, substitutions and
 *  swaps of neighbours, each 1 (a mistyped name is near the right one).
 *  Names over 63 bytes are far from everything (INT_MAX). */
int sl__opts_distance(const char *a, const char *b);

/** Parses a size like 256M, 1G, 4096 (bytes; binary units, an optional
 *  trailing "B" or "iB"). @return the bytes, or -1. */
long long sl__parse_size(const char *s);
/** Parses a whole decimal number in [lo, hi] into *out. @return 0, or -1
 *  (*out unchanged). */
int sl__parse_ll(const char *s, long long lo, long long hi, long long *out);

#endif
