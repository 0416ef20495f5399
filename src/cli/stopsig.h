/* cli/stopsig: Ctrl-C (SIGINT), SIGTERM and SIGHUP (the terminal or the
 * ssh session gone) caught, so that a long command stops where it chooses
 * instead of where the signal lands: `run` before
 * its next batch (the summary and --state follow), `pack` before its next
 * record (what it wrote is removed, OUT left as it was), `index` between
 * files (no half-written sidecar). The rule is here
 * once:
 *   - a signal that is ignored when caught is left ignored (nohup, or a
 *     background job's SIGINT in a shell without job control);
 *   - the first one is noted (sl__stop_signal) and `note` is written to
 *     stderr; the command polls and stops;
 *   - a second one ends the process at once, as if never caught. */
#ifndef SL_CLI_STOPSIG_H
#define SL_CLI_STOPSIG_H

/* Catches SIGINT, SIGTERM and SIGHUP from here on. note: written (as it is) at
 * the first signal; static storage, e.g. "\nsluice pack: stopping ...\n". */
void sl__stop_catch(const char *note);
/* 0, or the first signal caught (SIGINT, SIGTERM or SIGHUP). Any thread. */
int sl__stop_signal(void);
/* "SIGINT", "SIGTERM" or "SIGHUP" (its name in messages and JSON). */
const char *sl__stop_name(int sig);

#endif
