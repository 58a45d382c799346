/*
 * plaitrun: signal handling.
 *
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT (to forward) and SIGCHLD (a rank exited)
 * are blocked at all times except inside ppoll(), which receives
 * plaitrun_signals_poll_mask(); the handlers only record the signal, and the
 * main loop acts on it after ppoll returns. That is race-free: a signal that
 * arrives outside ppoll stays pending and interrupts the next ppoll at once.
 * SIGPIPE is ignored so a closed stdout is a write error, not death.
 */
#ifndef PLAITRUN_SIGNALS_H
#define PLAITRUN_SIGNALS_H

#include <signal.h>

/* Installs the handlers and blocks the signals. 0, or -1 with errno. */
int plaitrun_signals_install(void);

/* The signal mask to use inside ppoll (the one plaitrun started with, minus
 * the handled signals). */
const sigset_t *plaitrun_signals_poll_mask(void);

/* The next forwardable signal received since the last call, or 0. */
int plaitrun_signals_take_forward(void);

/* 1 when SIGCHLD arrived since the last call, then cleared. */
int plaitrun_signals_take_child(void);

/* 1 when a forwardable signal is pending (blocked, not yet handled). */
int plaitrun_signals_forward_pending(void);

/* "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGKILL", else "a signal". */
const char *plaitrun_signal_name(int signo);

/* In a forked child before exec: the dispositions (SIG_DFL, or SIG_IGN where
 * plaitrun found the signal ignored) and the signal mask plaitrun started
 * with. Async-signal-safe. */
void plaitrun_signals_reset_in_child(void);

#endif
