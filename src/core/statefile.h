/* core/statefile: the text of a resume state (the CLI's --state file,
 * read back by --resume): where a run stopped, the digest so far, and what
 * the position is only valid with (the options' hash, the source's sample
 * count and a hash of what else identifies it). A parser of outside bytes:
 * strict (every line as written, nothing else), every number range-checked
 * before a loader sees it; fuzzed by fuzz/fuzz_statefile.c. */
#ifndef SL_STATEFILE_H
#define SL_STATEFILE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

/* A state file holds at most this many bytes (a few lines). */
#define SL__STATE_MAX_BYTES 512
/* Epoch, batch and samples are decimal, at most 18 digits: below 10^18,
 * so a loader's arithmetic on them starts far from overflow (sl_loader_start
 * checks the rest against the source). */
#define SL__STATE_MAX_NUM 999999999999999999LL

typedef struct sl__state {
    sl_position_t pos; /* the next batch to hand out */
    uint64_t digest;   /* of the batches before it (--digest) */
    uint64_t config;   /* hash of the options that shape the stream */
    int64_t samples;   /* samples (text: documents) of the source */
    uint64_t dataset;  /* hash of what else identifies the source */
} sl__state_t;

/* "<magic>\nepoch E\nbatch B\ndigest D\nconfig C\nsamples N\ndataset H\n"
 * into buf. @return its length, or -1 when it does not fit or a field is
 * out of range. */
int sl__state_format(const char *magic, const sl__state_t *s, char *buf,
                     size_t len);
/* Parses n bytes written by sl__state_format with the same magic (no '%'
 * or newline in it). @return 0 and *s, or SL_ECORRUPT with the line and
 * the cause in err. */
int sl__state_parse(const char *text, size_t n, const char *magic,
                    sl__state_t *s, char *err, size_t errlen);

#endif
