/*
 * In-process multi-rank harness: N engines in one process, a thread per rank,
 * over real loopback sockets (as Gloo's tests do), so a multi-rank engine test
 * takes milliseconds and needs no fork.
 *
 * plait_test_run_engines() picks a free loopback port and a fresh secret,
 * starts one thread per rank, and in each builds the engine from an explicit
 * configuration and topology (src/engine/engine.h; nothing is read from or
 * written to the environment but the defaults of unset variables), binds the
 * thread to it (so the public C ABI called on that thread works on that
 * rank's engine, and log lines show its rank), runs fn(rank, nranks, arg),
 * shuts the engine down through plait_shutdown() unless fn did, and frees it.
 * Returns 0 when every rank's engine started and fn returned 0 everywhere;
 * rc[] holds each rank's result (fn's, or -1 when its engine did not start).
 * A rank that fails is reported with its reason on stderr.
 */
#ifndef PLAIT_TEST_ENGINES_H
#define PLAIT_TEST_ENGINES_H

#include "ranks.h" /* plait_test_rank_fn, PLAIT_TEST_MAX_RANKS */

typedef struct plait_test_engines {
  int nranks;
  const char *transport;     /* "gloo" (when NULL), "ofi", ... */
  const char *const *settings; /* NULL-terminated "PLAIT_NAME=value" (numeric
                                  ones, and PLAIT_AUTOTUNE_LOG), or NULL */
  int rc[PLAIT_TEST_MAX_RANKS];
  double elapsed_s;          /* from the first start to the last engine freed */
} plait_test_engines_t;

int plait_test_run_engines(plait_test_engines_t *job, plait_test_rank_fn fn, void *arg);

#endif
