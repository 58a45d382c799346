/*
 * The program's own SIGINT and SIGTERM handlers, kept across a transport's
 * start.
 *
 * A transport plugin and the libraries it pulls in may install handlers of
 * their own: with the ofi plugin, libfabric 1.17's shm provider and
 * libinfinipath (loaded with libfabric's psm provider) take SIGINT and
 * SIGTERM while they load and start, and end the process with status 1. In a
 * program with handlers of its own that ended it before they ran: Python's
 * Ctrl-C never became KeyboardInterrupt, a SIGTERM handler (a launcher's
 * graceful stop, elastic training's) never ran. So the engine notes the two
 * actions before it loads a transport and, once the transport has started
 * (or failed to), puts back those that were the program's own handlers (not
 * SIG_DFL or SIG_IGN). Where the program left the default, the libraries'
 * handlers stay (libfabric's removes its shared-memory regions before the
 * process ends). Other signals are left alone.
 */
#ifndef PLAIT_PROGRAM_SIGNALS_H
#define PLAIT_PROGRAM_SIGNALS_H

#include <signal.h>

typedef struct plait_program_signals {
  struct sigaction before[2]; /* SIGINT, SIGTERM */
  int saved[2];
} plait_program_signals_t;

/* Notes the program's SIGINT and SIGTERM actions. */
void plait_program_signals_note(plait_program_signals_t *s);

/* Puts back each noted action that was the program's own handler and was
 * replaced since; returns how many it put back. */
int plait_program_signals_keep(const plait_program_signals_t *s);

#endif
