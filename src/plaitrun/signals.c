#include "signals.h"

#include <errno.h>
#include <string.h>

static const int FORWARDED[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NFORWARDED ((int)(sizeof FORWARDED / sizeof FORWARDED[0]))

static volatile sig_atomic_t received[NFORWARDED];
static volatile sig_atomic_t child_exited;
static struct sigaction original_action[NFORWARDED];
static struct sigaction original_pipe_action;
static sigset_t original_mask;
static sigset_t poll_mask;

static void on_signal(int signo) {
  if (signo == SIGCHLD) {
    child_exited = 1;
    return;
  }
  for (int i = 0; i < NFORWARDED; i++)
    if (FORWARDED[i] == signo) received[i] = 1;
}

int plaitrun_signals_install(void) {
  sigset_t handled;
  sigemptyset(&handled);
  for (int i = 0; i < NFORWARDED; i++) sigaddset(&handled, FORWARDED[i]);
  sigaddset(&handled, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &handled, &original_mask) != 0) return -1;
  poll_mask = original_mask;
  for (int i = 0; i < NFORWARDED; i++) sigdelset(&poll_mask, FORWARDED[i]);
  sigdelset(&poll_mask, SIGCHLD);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_NOCLDSTOP;
  for (int i = 0; i < NFORWARDED; i++) {
    if (sigaction(FORWARDED[i], NULL, &original_action[i]) != 0) return -1;
    /* A signal ignored by whoever started plaitrun (nohup, a background job
     * of a non-interactive shell) stays ignored, for plaitrun and the ranks. */
    if (original_action[i].sa_handler == SIG_IGN) continue;
    if (sigaction(FORWARDED[i], &sa, NULL) != 0) return -1;
  }
  if (sigaction(SIGCHLD, &sa, NULL) != 0) return -1;
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  return sigaction(SIGPIPE, &ign, &original_pipe_action);
}

const sigset_t *plaitrun_signals_poll_mask(void) { return &poll_mask; }

int plaitrun_signals_take_forward(void) {
  for (int i = 0; i < NFORWARDED; i++) {
    if (received[i]) {
      received[i] = 0;
      return FORWARDED[i];
    }
  }
  return 0;
}

int plaitrun_signals_take_child(void) {
  int was = child_exited;
  child_exited = 0;
  return was;
}

int plaitrun_signals_forward_pending(void) {
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  for (int i = 0; i < NFORWARDED; i++)
    if (sigismember(&pending, FORWARDED[i]) == 1) return 1;
  return 0;
}

void plaitrun_signals_reset_in_child(void) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int i = 0; i < NFORWARDED; i++) {
    int ignored = original_action[i].sa_handler == SIG_IGN;
    sigaction(FORWARDED[i], ignored ? &original_action[i] : &dfl, NULL);
  }
  sigaction(SIGCHLD, &dfl, NULL);
  sigaction(SIGPIPE, &original_pipe_action, NULL);
  sigprocmask(SIG_SETMASK, &original_mask, NULL);
}

const char *plaitrun_signal_name(int signo) {
  switch (signo) {
  case SIGINT: return "SIGINT";
  case SIGTERM: return "SIGTERM";
  case SIGHUP: return "SIGHUP";
  case SIGQUIT: return "SIGQUIT";
  case SIGKILL: return "SIGKILL";
  default: return "a signal";
  }
}
