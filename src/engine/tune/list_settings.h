/*
 * Internal: the settings each response list runs with (fusion threshold,
 * largest fused tensor, cycle time), the same on every rank.
 *
 * With PLAIT_AUTOTUNE on rank 0, rank 0's autotuner (engine/tune/autotune.h)
 * chooses them; a list planned under new settings carries them
 * (PLAIT_RESP_TUNING, negotiate/messages.h) and every rank runs that list and
 * the following ones with them. Without it every rank uses its own
 * (plait_config_set values). A digest of the settings of every list run
 * (plait_stats.settings_digest) lets tests check that ranks never disagree.
 *
 * Owned by the coordinator thread; not thread-safe.
 */
#ifndef PLAIT_LIST_SETTINGS_H
#define PLAIT_LIST_SETTINGS_H

#include "engine/tune/autotune.h"
#include "engine/negotiate/messages.h"
#include "engine/observe/stats.h"
#include "engine/tune/tunables.h"
#include "util/config.h"

typedef struct plait_list_settings {
  const plait_config_t *cfg;
  int rank;
  plait_autotune_t *at;      /* rank 0 while PLAIT_AUTOTUNE is on */
  plait_list_tuning_t now;   /* what lists run with (active 0: each rank's own) */
  int unsent;                /* rank 0: now changed since the last list carried it */
  uint64_t before_bytes, before_tensors; /* rank 0: stats before the list ran */
  /* rank 0 while tuning: hashes of the (process set, name) of the tensors run
   * since the current training step began (open addressing, 0 empty) */
  uint64_t *seen;
  int nseen;
  int by_list; /* names never repeat: every list counts as a step */
} plait_list_settings_t;

/* A training step ends where a tensor name comes back (autotune.h samples
 * whole steps). Up to PLAIT_LS_SEEN_MAX names are remembered per step. */
#define PLAIT_LS_SEEN_CAP 16384
#define PLAIT_LS_SEEN_MAX 8192

void plait_ls_init(plait_list_settings_t *ls, const plait_config_t *cfg, int rank);
void plait_ls_free(plait_list_settings_t *ls);

/* Rank 0, before planning a list: starts or stops the tuner as own->autotune
 * says (a tuner that cannot start, e.g. its log cannot be written, is an
 * error). Every rank: writes the settings lists run with over *own. */
plait_result_t plait_ls_decide(plait_list_settings_t *ls, plait_tuning_t *own);

/* Rank 0: a list about to be sent carries the settings when they changed. */
void plait_ls_attach(plait_list_settings_t *ls, plait_response_list_t *l);

/* Ranks > 0: a list arrived; takes the settings it carries. */
void plait_ls_receive(plait_list_settings_t *ls, const plait_response_list_t *l);

/* Every rank, around running a non-empty list with the settings in *v:
 * before (the plait_stats fields and the digest, kept in the counters: a
 * plait_stats_reset starts the digest again), after (rank 0 feeds the tuner
 * the bytes and tensors list l moved, and whether l began a training step:
 * one of its tensor names ran since the last step began). */
void plait_ls_before_run(plait_list_settings_t *ls, const plait_tuning_t *v,
                         plait_counters_t *stats);
void plait_ls_after_run(plait_list_settings_t *ls, const plait_response_list_t *l,
                        plait_counters_t *stats, double now);

/* Tests only: when set, the tuner's time comes from this clock instead of
 * now (a cost model's virtual time, so a test does not depend on the speed
 * of the machine). Set before plait_init, cleared after shutdown. */
extern double (*plait_ls_test_clock)(void);

#endif
