/* data/remote_parse: the bytes from outside that data/remote reads, parsed
 * without libcurl (so they are fuzzed in every build, fuzz/fuzz_remote.c):
 * HTTP response header lines (Content-Range, Content-Length), INI files
 * (~/.aws/credentials, ~/.aws/config), and what a URL is. Depends on base. */
#ifndef SL_REMOTE_PARSE_H
#define SL_REMOTE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* 1 when s is a URL data/remote reads: http://, https://, s3:// (scheme
 * case-insensitive). */
int sl__remote_is_url(const char *s);

/* One response header line ("Name: value\r\n", n bytes, not terminated):
 * when its name is `name` (case-insensitive), *val and *vlen get the value
 * without surrounding blanks and the line end, and 1 is returned; else 0. */
int sl__http_header(const char *line, size_t n, const char *name,
                    const char **val, size_t *vlen);

/* A Content-Range value ("bytes FIRST-LAST/TOTAL", TOTAL may be "*";
 * "bytes * / TOTAL" of a 416): 0 and the numbers (UINT64_MAX for an
 * unknown part), or -1 when malformed or FIRST > LAST. */
int sl__http_content_range(const char *v, size_t n, uint64_t *first,
                           uint64_t *last, uint64_t *total);

/* A decimal Content-Length value: 0 and *len, or -1. */
int sl__http_u64(const char *v, size_t n, uint64_t *len);

/* An INI text (n bytes): the value of `key` in section `section` ("[NAME]"
 * lines; "#" and ";" start comments; "key = value"), blanks trimmed, into
 * out. @return 1 when found and it fits, else 0. */
int sl__ini_get(const char *text, size_t n, const char *section,
                const char *key, char *out, size_t outlen);

#endif
