/* See program_signals.h. */
#include "util/program_signals.h"

#include <string.h>

static const int kept[2] = {SIGINT, SIGTERM};

void plait_program_signals_note(plait_program_signals_t *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < 2; i++) s->saved[i] = sigaction(kept[i], NULL, &s->before[i]) == 0;
}

static int is_handler(const struct sigaction *a) {
  if (a->sa_flags & SA_SIGINFO) return a->sa_sigaction != NULL;
  return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN && a->sa_handler != NULL;
}

static int same(const struct sigaction *a, const struct sigaction *b) {
  if ((a->sa_flags & SA_SIGINFO) != (b->sa_flags & SA_SIGINFO)) return 0;
  if (a->sa_flags & SA_SIGINFO) return a->sa_sigaction == b->sa_sigaction;
  return a->sa_handler == b->sa_handler;
}

int plait_program_signals_keep(const plait_program_signals_t *s) {
  int put_back = 0;
  for (int i = 0; i < 2; i++) {
    struct sigaction now;
    if (!s->saved[i] || !is_handler(&s->before[i])) continue;
    if (sigaction(kept[i], NULL, &now) != 0 || same(&now, &s->before[i])) continue;
    if (sigaction(kept[i], &s->before[i], NULL) == 0) put_back++;
  }
  return put_back;
}
