/*
 * Internal: heartbeats while the coordinator thread is away from its loop.
 *
 * The coordinator thread writes every control message itself and sends an
 * empty one when it has been quiet for PLAIT_TIMEOUT_S / 4, so that silence
 * longer than the timeout means a lost rank. While it is away from its loop
 * (inside a transport collective, running completion callbacks, or waiting
 * out a blame round) it cannot; a small thread then sends a heartbeat
 * (PLAIT_MSG_ALIVE, no payload) on each of its control connections every
 * period through the control plane (plait_control_send_heartbeat), so that a live rank is never silent for long, and a rank that
 * stays silent (stopped, wedged) is the lost one.
 *
 * One thread writes a control connection at a time: the liveness thread
 * writes only between plait_live_away() and plait_live_back(), and
 * plait_live_back() returns once it is not writing. A heartbeat that does not
 * fit into the socket buffer at once is skipped, so a stopped peer never
 * blocks it. All functions but plait_live_start/stop are called only by the
 * coordinator thread.
 */
#ifndef PLAIT_ENGINE_LIVENESS_H
#define PLAIT_ENGINE_LIVENESS_H

#include <pthread.h>
#include <stdint.h>

#include "control/control.h"
#include "plait/plait.h"

typedef struct plait_live {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started;
  int away, stop; /* under mu */
  plait_control_t *ctrl;
  double period_s;
  double last_beat; /* under mu */
  uint64_t beats;   /* heartbeats sent, under mu */
} plait_live_t;

/* Starts the thread for ctrl (a job of more than one rank). */
plait_result_t plait_live_start(plait_live_t *l, plait_control_t *ctrl, double period_s);

/* The coordinator thread leaves its loop / is back (no heartbeat is being
 * written when this returns). Calls pair up; both are harmless when the
 * thread was not started. */
void plait_live_away(plait_live_t *l);
void plait_live_back(plait_live_t *l);

/* Stops and joins the thread; harmless when it was not started. */
void plait_live_stop(plait_live_t *l);

#endif
