/*
 * Internal: who is to blame when a collective fails in the transport.
 *
 * The transport's message often cannot say whether a rank is gone (a
 * timeout, or a survivor that was not that rank's neighbour), and a rank
 * whose own collective failed cannot tell a dead peer from a live one that
 * failed too. So every rank > 0 whose collective failed reports it to rank
 * 0, with its error and message (PLAIT_REQ_FAILED), and rank 0 holds a blame
 * round: a rank whose connection closed, or that shows no sign of life for
 * the round, is lost (PLAIT_ERR_PEER_LOST, naming it). When every rank
 * answered, no rank was lost: the verdict is the failure itself, named by
 * the rank it happened on and its reason (PLAIT_ERR_TRANSPORT, or the error
 * the failing rank's transport gave when it is not PEER_LOST). Rank 0's
 * verdict (ABORT) reaches every survivor, so every rank fails with the same
 * class and message. A rank > 0 that hears nothing from rank 0 for a round
 * names rank 0.
 *
 * Called by the coordinator thread only: plait_blame_reported while rank 0
 * reads reports, plait_blame_verdict once, after its cycle failed.
 */
#ifndef PLAIT_ENGINE_BLAME_H
#define PLAIT_ENGINE_BLAME_H

#include <poll.h>
#include <stdint.h>

#include "control/control.h"
#include "engine/health/liveness.h"
#include "plait/plait.h"

typedef struct plait_blame {
  plait_control_t *ctrl;
  plait_live_t *live;
  int rank, size;
  double timeout_s;   /* PLAIT_TIMEOUT_S */
  struct pollfd *pfd; /* scratch: size entries */
  uint64_t lists_run; /* rank > 0: response lists run, sent with the report */
  /* rank 0: the rank whose failure report failed the cycle (0: none), and
   * what it reported (plait_blame_reported) */
  int reporter;
  uint32_t reported_code;
  char reported[2048];
} plait_blame_t;

/* The heartbeat period of the liveness thread (PLAIT_TIMEOUT_S / 4, at most
 * 0.5 s): a blame round lasts two of them and a second. */
double plait_blame_live_period_s(double timeout_s);

/* At the coordinator's start: b set up for this rank of the job. pfd is
 * scratch of size entries, live the liveness thread (heartbeats during the
 * round). Harmless to call again. */
void plait_blame_init(plait_blame_t *b, plait_control_t *ctrl, plait_live_t *live, int rank,
                      int size, double timeout_s, struct pollfd *pfd);

/* THE call after the coordinator's cycle failed with rc (its message in
 * plait_last_error()): when the failure came from running a collective
 * (in_transport) in a job of 2 or more, the verdict of a blame round (rank
 * 0 holds it; a rank > 0 reports rc, with the lists_run it ran, and takes
 * rank 0's verdict), its message set; otherwise rc itself. */
plait_result_t plait_blame_verdict(plait_blame_t *b, plait_result_t rc, int in_transport,
                                   uint64_t lists_run);

/* Rank 0: rank's failure report (its error code and message) noted for the
 * round; returns the error it stands for until the round has judged it
 * (PLAIT_ERR_TRANSPORT), its message set. */
plait_result_t plait_blame_reported(plait_blame_t *b, int rank, uint32_t code, const char *text);

#endif
