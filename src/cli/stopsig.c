/* cli/stopsig: see stopsig.h. */
#include "stopsig.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
static const char *stop_note; /* set before the handler is installed */

static void on_stop(int sig)
{
    if (stop_signal) { /* the second: as if not caught */
        signal(sig, SIG_DFL);
        raise(sig); /* delivered as the handler returns */
        return;
    }
    stop_signal = sig;
    if (stop_note) {
        ssize_t w = write(STDERR_FILENO, stop_note, strlen(stop_note));
        (void)w;
    }
}

void sl__stop_catch(const char *note)
{
    stop_note = note;
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        if (!sigaction(sigs[i], NULL, &old) && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

int sl__stop_signal(void)
{
    return stop_signal;
}

const char *sl__stop_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
}
