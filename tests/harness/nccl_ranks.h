/*
 * A Criterion-free harness for the nccl plugin's GPU tests (the GPU machine
 * has no Criterion): it counts the CUDA devices in a child process (CUDA
 * must not be touched before fork), forks one rank per device, and gives the
 * ranks a bootstrap over socketpairs through rank 0, as the core's control
 * plane does. Tests skip (exit 77, ctest's SKIP_RETURN_CODE) with the
 * reason printed where there is no GPU.
 */
#ifndef PLAIT_TEST_NCCL_RANKS_H
#define PLAIT_TEST_NCCL_RANKS_H

#include <stddef.h>

#include "plait/transport.h"

#define NT_SKIP 77
#define NT_MAX_RANKS 8

/* The CUDA devices here, counted in a child; 0 with the reason in why (CUDA's
 * error text) when there is none. */
int nt_device_count(char *why, size_t len);

/* fn(rank, nranks, table, state, arg) in each of nranks forked ranks, each
 * with the plugin initialised (local rank = rank, so rank r uses device r).
 * The parent waits up to timeout_s, kills what is left, and returns 0 when
 * every rank returned 0. */
typedef int (*nt_rank_fn)(int rank, int nranks, const plait_transport_t *t, void *state,
                          void *arg);
int nt_run(int nranks, double timeout_s, nt_rank_fn fn, void *arg);

/* As nt_run, for a job whose init must fail (no GPU): each rank returns
 * fn(rank, nranks, init's result, last_error(NULL)); an init that succeeds
 * fails the rank. */
typedef int (*nt_init_fail_fn)(int rank, int nranks, plait_result_t rc, const char *msg);
int nt_run_failing_init(int nranks, double timeout_s, nt_init_fail_fn fn);

/* The bootstrap of the current rank (inside nt_run), for tests that make
 * their own NCCL communicator beside the plugin's (the benchmark). */
const plait_bootstrap_t *nt_bootstrap(void);

/* Prints to stderr prefixed with the rank. */
void nt_say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Unsets every variable that would make this process part of a bigger job
 * or change plait's configuration (PLAIT_*, launchers' ranks), then sets
 * PLAIT_TRANSPORT=nccl and PLAIT_PLUGIN_PATH to the built plugin's folder:
 * for the tests that go through the public C API. */
void nt_api_env(void);

/* Element access by dtype and the reduction reference: tests/harness/dtype_oracle.h
 * (ops_put, ops_get, ops_reduce). */

#endif
