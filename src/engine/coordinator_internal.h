/*
 * Internal to the hall (docs/coordinator.md, "a hall and its wings"): the
 * coordinator's state, shared by coordinator.c (the loop) and
 * coordinator_epoch.c (the cached epoch's turn, also run by a waiting
 * caller under PLAIT_CALLER_RUNS). Only those two include it.
 */
#ifndef PLAIT_COORDINATOR_INTERNAL_H
#define PLAIT_COORDINATOR_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "engine/coordinator.h"
#include "engine/engine.h"
#include "engine/execute/execute.h"
#include "engine/health/blame.h"
#include "engine/health/liveness.h"
#include "engine/health/silence.h"
#include "engine/negotiate/announce.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/epoch.h"
#include "engine/negotiate/negotiate.h"
#include "engine/negotiate/tree_and.h"
#include "engine/submit/table.h"
#include "engine/submit/turn.h"
#include "engine/tune/list_settings.h"
#include "util/spin.h"
#include "util/waitset.h"

#define CYCLE_DONE ((plait_result_t)-1) /* coordination ended normally */

struct plait_coord {
  plait_engine_t *e; /* the engine this coordinator belongs to */
  pthread_t thread;
  int started;
  plait_table_t table;
  const plait_config_t *cfg;
  plait_control_t *ctrl;
  int rank, size;
  const plait_transport_t *t;
  plait_cache_t cache;
  plait_negotiator_t neg; /* rank 0 */
  plait_namemap_t local;  /* name -> entry announced, waiting for its response */
  plait_exec_t exec;
  atomic_int stop;
  int sent_shutdown;
  double shutdown_sent_at;
  struct pollfd *pfd;
  plait_waitset_t waitset; /* rank 0: one socket per rank, waited on with epoll */
  plait_silence_t silence; /* when this rank last sent, and last heard from each */
  uint64_t lists_run;    /* response lists run so far (peers send it as acked) */
  int transport_failed; /* the failure came from running a collective */
  plait_blame_t blame;  /* after a collective failed: who is to blame (blame.h) */
  int ended_by;         /* the rank whose plait_shutdown ended coordination, -1 */
  plait_tuning_t tune;  /* the run-time settings, as of this cycle's start */
  plait_live_t live;    /* heartbeats while this thread is away from its loop */
  int answer_alive;     /* rank > 0: rank 0's heartbeat came; send one back */
  plait_list_settings_t lists; /* the settings lists run with (PLAIT_AUTOTUNE) */
  int lazy;             /* rank 0: this wait's wake-up drains the table (root_may_sleep) */
  double last_busy;     /* when a cycle last sent, received or ran something */
  double neg_cpu0;      /* this thread's CPU clock when negotiation time began (neg_start) */
  plait_spin_t spin;    /* polling before sleeping (PLAIT_SPIN_US) */
  plait_announce_t ann; /* rank > 0: cached allreduces waiting for their burst */
  plait_and_t tand;     /* a relaying rank: the AND of its subtree's cached ids (tree_and.h) */
  plait_epoch_t ep;     /* the cached epoch (PLAIT_CACHED_EPOCH, epoch.h) */
  plait_tuning_t ep_tune; /* the settings when it opened: a change closes it */
  plait_turn_t *turn;     /* who calls the transport now (PLAIT_CALLER_RUNS, turn.h) */
  plait_result_t caller_rc; /* a caller's round failed: the failure path takes it */
  char caller_msg[1024];
};

/* coordinator.c: what the epoch's turn shares with the loop */
plait_result_t plait_coord_take_new(plait_coord_t *c, plait_request_list_t *req);
plait_result_t plait_coord_run_list(plait_coord_t *c, const plait_response_list_t *l);
/* Timeline: l agreed, its operations now queued to run. */
void plait_coord_mark_queued(plait_coord_t *c, const plait_response_list_t *l);
plait_result_t plait_coord_root_take(plait_coord_t *c, int rank, const plait_request_list_t *req,
                                     uint32_t fail_code, const char *fail_text);
plait_result_t plait_coord_send_requests(plait_coord_t *c, const plait_request_list_t *req);
int plait_coord_heartbeat_due(plait_coord_t *c);
double plait_coord_neg_start(plait_coord_t *c);
void plait_coord_add_negotiation_time(plait_coord_t *c, double s);

/* coordinator_epoch.c: the cached epoch (epoch.h) as the loop drives it */
plait_result_t plait_coord_maybe_open_epoch(plait_coord_t *c, const plait_response_list_t *l);
plait_result_t plait_coord_epoch_turn(plait_coord_t *c, int *busy, double wait_s);
plait_result_t plait_coord_peer_epoch(plait_coord_t *c, int *busy);
int plait_coord_epoch_may_open(plait_coord_t *c);

/* PLAIT_CALLER_RUNS: the turn word's run and wake (turn.h), arg the
 * coordinator. A caller holding the turn runs the epoch's turn for h. */
void plait_coord_caller_round(void *arg, plait_handle_t *h, double wait_s);
void plait_coord_wake(void *arg);

#endif
