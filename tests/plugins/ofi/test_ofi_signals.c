/*
 * A program's own SIGINT and SIGTERM handlers survive the start of the ofi
 * transport (src/util/program_signals.h). libfabric 1.17's shm provider and
 * libinfinipath (loaded with libfabric's psm provider) replace them with
 * handlers that end the process with status 1, so Python's Ctrl-C never
 * became KeyboardInterrupt and a SIGTERM handler never ran. Each rank here
 * inherits handlers installed before plait_init, the engine starts the
 * transport (tm_run), and the rank then raises both signals: its own
 * handlers must run, and the rank must live on to run a collective.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "api/core.h"
#include "ofi_job.h"
#include "transport_matrix.h"

static volatile sig_atomic_t got_int, got_term;

static void on_int(int sig) {
  (void)sig;
  got_int++;
}

static void on_term(int sig, siginfo_t *info, void *uc) {
  (void)sig, (void)info, (void)uc;
  got_term++;
}

static int handlers_body(tm_ctx_t *c) {
  struct sigaction now;
  sigaction(SIGINT, NULL, &now);
  if (now.sa_handler != on_int) {
    plait_test_say(c->rank, "SIGINT's handler was replaced while the plugin started");
    return 1;
  }
  raise(SIGINT);
  raise(SIGTERM);
  if (got_int != 1 || got_term != 1) {
    plait_test_say(c->rank, "own handlers ran %d (SIGINT) and %d (SIGTERM) times, not once each",
                   (int)got_int, (int)got_term);
    return 1;
  }
  return tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1001); /* and it lives on */
}

static void no_coordinator(void) { plait_core_test_without_coordinator(1); }
TestSuite(ofi_signals, .init = no_coordinator);

static void run_with_handlers(const char *prov, int nranks) {
  ofi_require_plugin();
  struct sigaction a, old_int, old_term;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_int;
  sigemptyset(&a.sa_mask);
  sigaction(SIGINT, &a, &old_int);
  a.sa_flags = SA_SIGINFO;
  a.sa_sigaction = on_term;
  sigaction(SIGTERM, &a, &old_term);
  ofi_run_job(prov, nranks, handlers_body, NULL);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
}

Test(ofi_signals, shm_keeps_the_programs_sigint_and_sigterm_handlers, .timeout = 90) {
  run_with_handlers("shm", 2);
}
Test(ofi_signals, tcp_keeps_the_programs_sigint_and_sigterm_handlers, .timeout = 90) {
  run_with_handlers("tcp", 3);
}
