/* cli/run_args: the command line of `run` / `bench` over images
 * (cmd_run.c): its options (the shared consumer ones come from consume.h),
 * the SOURCE operand, and what a --state file must agree on. */
#ifndef SL_CLI_RUN_ARGS_H
#define SL_CLI_RUN_ARGS_H

#include "consume.h"
#include "knob_sets.h"
#include "sluice/sluice.h"

typedef struct sl__run_args {
    const char *source;
    sl_options_t opt;
    int64_t storage[3]; /* sl_testing_storage_t -> value (0: off) */
    double step_ms;
    sl__consume_args_t c; /* --digest, --json, --batch, --seed, ... */
    sl__knob_sets_t sets; /* --set */
    sl_loader_t *loader;  /* once created (cmd_run.c) */
} sl__run_args_t;

/* Parses into a sl__run_args_t (the ctx of sl__consume_begin). */
extern const sl__consume_cli_t sl__run_cli;

#endif
