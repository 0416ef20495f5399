/* base: errors, messages, clocks, growable buffers. Depends on nothing. */
#ifndef SL_BASE_H
#define SL_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "sluice/sluice.h"

/* Monotonic clock, nanoseconds. */
int64_t sl__now_ns(void);
/* The timespec of monotonic time ns (a sl__now_ns value): the deadline of
 * a pthread_cond_timedwait on a condition variable whose clock is
 * CLOCK_MONOTONIC (every timed wait in the tree). */
struct timespec sl__mono_timespec(int64_t ns);

/* printf into a fixed message buffer (never overflows, always terminated).
 * Returns `code` so error paths read `return sl__fail(err, n, SL_EIO, ...)`. */
int sl__fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Which failures a bad sample may cause. A failed system call's errno
 * becomes SL_ESYSTEM when the system ran out of something or the storage
 * failed (EMFILE, ENFILE, ENOMEM, ENOBUFS, EIO): not the sample's fault,
 * and skipping it would silently drop good data (a whole shard, every file
 * while descriptors are short); any other errno becomes `data_code`.
 * sl__err_is_data: 1 when rc may be skipped under SL_ON_ERROR_SKIP, 0 for
 * SL_ESYSTEM, which fails the run whatever the policy (issue 14). */
int sl__errno_code(int e, int data_code);
int sl__err_is_data(int rc);

/* A growable byte buffer; grows, never shrinks, so per-thread scratch is
 * allocation-free in steady state. */
typedef struct sl__bytes {
    uint8_t *p;
    size_t n;
    size_t cap;
} sl__bytes_t;

/* Ensures cap >= want; keeps contents. Returns 0 or SL_ENOMEM. */
int sl__bytes_reserve(sl__bytes_t *b, size_t want);
void sl__bytes_free(sl__bytes_t *b);

/* Appends printf output to a fixed buffer, snprintf-style: never
 * overflows, keeps the text terminated, and counts the bytes a buffer would
 * need (`need`), so callers can size a buffer with a first pass on NULL. */
typedef struct sl__sbuf {
    char *buf;
    size_t cap, len;
    int need;
} sl__sbuf_t;
void sl__sbuf_printf(sl__sbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Names from outside (a file name, a record name in a shard) go into
 * messages printed on a terminal; their control bytes (< 0x20 and 0x7F:
 * ESC, CR, LF...) would act there, erase a line or forge one. These write
 * each as the four characters \xNN; every other byte (UTF-8 included) is
 * kept. Backslashes are kept too: the result is for reading, not for
 * parsing back (src/base/msgesc.c).
 * sl__msg_escape: in place, in buf of len bytes (terminated); what no
 * longer fits is cut, never inside an escape.
 * sl__msg_escape_dup: an escaped copy of s (malloc), or NULL. */
void sl__msg_escape(char *buf, size_t len);
char *sl__msg_escape_dup(const char *s);
/* Appends msg followed by what (NULL: nothing), escaped as above, to the
 * malloc'd list *v of *n messages (freed with sl__strv_free): what a
 * source left out, named, for the skip list. 0 or SL_ENOMEM. */
int sl__msg_list_add(char ***v, int *n, const char *msg, const char *what);

/* The body of a JSON string (RFC 8259) for an outside name or message:
 * quotes, backslashes and control bytes escaped, well-formed UTF-8 kept,
 * and each byte that is not UTF-8 (a file name need not be) written as
 * the four characters \xNN (in JSON "\\xNN"), as sl__msg_escape writes
 * control bytes for a terminal, so the line is valid JSON for every
 * parser (a lone surrogate such as \udce9 is refused by many).
 * sl__json_escape appends to b; sl__json_escape_dup returns a malloc'd
 * copy, or NULL. */
void sl__json_escape(sl__sbuf_t *b, const char *s);
char *sl__json_escape_dup(const char *s);

/* Little-endian load/store (the shard format is little-endian on disk). */
static inline void sl__put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void sl__put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sl__put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t sl__get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t sl__get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t sl__get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Opens an input file for reading (close-on-exec) and checks that it is a
 * regular file: a FIFO, device, socket or directory met where data is
 * expected (named like an image, swapped in after a scan) is refused at
 * once, "PATH: not a regular file (FIFO)", never waited on.
 * @return the descriptor (>= 0; *size its bytes when size is non-NULL), or
 * SL_ENOTFOUND (missing) / SL_ESYSTEM (EMFILE, EIO...: sl__errno_code) /
 * SL_EIO (other causes) with the message in err.
 * Every data-file open goes through here (src/base/file.c). */
int sl__open_regular(const char *path, int64_t *size, char *err, size_t errlen);
/* The whole of a regular file of at most `max` bytes, opened through
 * sl__open_regular (a FIFO or device such as /dev/zero is refused, never
 * read without end): *text (malloc'd; a NUL after its *n bytes). The one
 * way an input read whole (a vocabulary) is read.
 * @return 0, or with "PATH: cause" in err: sl__open_regular's codes,
 * SL_EUNSUPPORTED (larger than max), SL_ENOMEM, SL_EIO (a read error, or
 * the file shrank while read). */
int sl__read_small_file(const char *path, size_t max, char **text, size_t *n,
                        char *err, size_t errlen);
/* As sl__read_small_file, for an input that may be a pipe: a FIFO, or
 * process substitution's /dev/fd/N (`<(printf ...)`). A FIFO with no
 * writer reads as empty at once (never waited on); a pipe's writer is
 * given timeout_ms in all to send its bytes and close it, or the read
 * fails ("a pipe whose writer sent nothing for 5.0 s", or "sent N bytes
 * and did not close it within 5.0 s"). A device, socket or folder
 * is refused: "PATH: not a regular file or a pipe (character device)".
 * @return 0, or sl__read_small_file's codes with "PATH: cause" in err.
 * The one way a small input that may come from a pipe (an AWS
 * credentials file) is read. */
int sl__read_small_input(const char *path, size_t max, int timeout_ms,
                         char **text, size_t *n, char *err, size_t errlen);
/* Writes n bytes as the whole of the file at path, or nothing: through
 * PATH.tmp-PID in the same folder (a process of its own each, so two never
 * share one), fsync'd and renamed over path. Whatever fails, the temp file
 * is removed and path is as it was. What path names must be missing or a
 * regular file: a FIFO, device or folder there is refused, never replaced
 * (a --state /dev/full would otherwise turn the device into a file).
 * @return 0, or SL_EIO / SL_ESYSTEM (sl__errno_code) with "PATH: cause" in
 * err. The one way a small output (a --state file) is written whole. */
int sl__write_file_whole(const char *path, const void *p, size_t n, char *err,
                         size_t errlen);

/* The next line of f without its '\n' in *buf (grown as needed, up to
 * `max` bytes, NUL-terminated), its length in *len. A line longer is
 * consumed, not kept, so a file with no newline cannot grow memory.
 * @return 0 (a line), SL__LINE_EOF at the end of the file, SL__LINE_LONG
 * (a line over max), or SL_ENOMEM / SL_EIO (ferror; errno says why):
 * never an error taken for the end. */
#define SL__LINE_EOF 1
#define SL__LINE_LONG 2
int sl__read_line(FILE *f, size_t max, char **buf, size_t *cap, size_t *len);

/* "regular file", "directory", "FIFO", ... for a st_mode. */
const char *sl__file_type_name(unsigned mode);

/* Paths (src/base/path.c).
 * sl__path_join: "DIR/NAME" (malloc'd, or NULL when out of memory) with
 * one slash between, however many DIR ends with ("shards/" and "shards"
 * give "shards/NAME"); DIR "" gives NAME. The one rule for DIR + an entry
 * of it, in messages and for opening alike.
 * sl__path_join_buf: the same into buf (snprintf's rules: @return the
 * length the whole path needs; it fits when that is < cap).
 * sl__mkdir_p: creates the folder path and each missing folder above it,
 * as `mkdir -p` (mode 0777 less the umask); one already there is fine.
 * sl__mkdir_parents: the same for the folders above path only.
 * @return 0, or -1 with errno (ENOTDIR: a component is a file; EACCES,
 * ENOSPC, ...): the cause for a message that names the caller's path.
 * sl__mkdir_made: sl__mkdir_p where the caller needs to know whether it
 * made the folder (an output folder it may remove again, one that must
 * be new): path with mode (less the umask), the missing folders above it
 * with 0777. The one rule for an output folder and its parents.
 * @return 1: made it; 0: a folder was already there; -1 with errno as
 * above (ENOTDIR also when path itself is a file). */
char *sl__path_join(const char *dir, const char *name);
int sl__path_join_buf(char *buf, size_t cap, const char *dir, const char *name);
int sl__mkdir_p(const char *path);
int sl__mkdir_parents(const char *path);
int sl__mkdir_made(const char *path, unsigned mode);

/* Online CPUs of this process (sched_getaffinity), at least 1. Defaults
 * and budgets use sl__cpus_usable (telemetry/machine.h), which also
 * counts the cgroup's CPU quota. */
int sl__ncpu(void);

#endif
