/*
 * Internal: the control plane. Rank 0 listens on the rendezvous address; every
 * other rank holds one authenticated TCP connection to it (a star). Frames are
 * those of wire.h. Once any peer is lost, the control plane is failed: rank 0
 * tells the survivors (ABORT naming the lost rank), and every later call on
 * any rank fails at once with the same error.
 *
 * Not thread-safe: one thread uses a control plane at a time (the engine's
 * liveness thread sends heartbeats, plait_control_send_heartbeat, only while
 * the coordinator thread has handed it the connections; see
 * engine/health/liveness.h).
 */
#ifndef PLAIT_CONTROL_H
#define PLAIT_CONTROL_H

#include <poll.h>
#include <stdint.h>

#include "util/config.h"
#include "plait/plait.h"
#include "control/topology.h"
#include "control/tree.h"
#include "control/wire.h"

/* Handshake frames are small; anything bigger before authentication is refused. */
#define PLAIT_HANDSHAKE_MAX_PAYLOAD 8192

typedef struct plait_frame {
  uint16_t type;
  uint32_t length;
  uint8_t *payload; /* malloc'd; NULL when length is 0 */
} plait_frame_t;

typedef struct plait_control {
  int rank, size;
  double timeout_s;
  double start_deadline, start_timeout_s;
  /* 1 while plait_init runs (plait_control_start until plait_control_started),
   * but not in an elastic job: waits for a silent peer last until
   * start_deadline, not PLAIT_TIMEOUT_S */
  int starting;
  const char *secret;
  uint64_t epoch; /* the elastic job's; 0: not elastic (auth.h: the MAC covers it) */
  int listen_fd;
  int *fds; /* rank 0: fds[r] for r > 0; others: fds[0] */
  char local_ip[64];
  char rendezvous[PLAIT_HOST_MAX + 16];
  plait_tree_t tree; /* PLAIT_CONTROL_FANOUT: lists go down a tree (tree.h) */
  plait_result_t failed; /* sticky failure, PLAIT_SUCCESS while healthy */
  char fail_msg[1024];
} plait_control_t;

/* Connects the job: rank 0 accepts and authenticates size-1 peers; the others
 * join rank 0 (in an elastic job, t->epoch, rank 0 takes t->listen_fd and a
 * process of another epoch is refused naming both). Then every rank learns every rank's host and fills t's local
 * and cross values. Fails within the start timeout, never hangs. On failure
 * everything is closed. */
plait_result_t plait_control_start(plait_control_t *c, plait_topology_t *t,
                                   const plait_config_t *cfg);

/* plait_init is done: from now on a peer silent for PLAIT_TIMEOUT_S is lost.
 * Until then (loading and starting the transport, whose bootstrap
 * collectives go through the control plane) a rank may be silent as long as
 * PLAIT_START_TIMEOUT_S allows: it sends nothing while it works alone between
 * two exchanges, and no liveness thread beats for it yet. A rank that dies
 * meanwhile is still named at once (its connection closes). Not in an
 * elastic job: its ranks were running and ready when the driver formed it,
 * and one silent past PLAIT_TIMEOUT_S is named lost so that the job re-forms
 * without it, as one that does not join (control_accept.c). */
void plait_control_started(plait_control_t *c);

/* Sends a finished frame (plait_wr_end done) to peer (rank 0: any rank > 0;
 * others: only 0). */
plait_result_t plait_control_send(plait_control_t *c, int peer, const plait_writer_t *w);

/* Receives the next frame from peer, which must be of type `type`; an ABORT
 * from rank 0 instead returns the job's failure. Gives up at now+timeout_s
 * (while starting: at the start deadline, plait_control_started).
 * Heartbeats (PLAIT_MSG_ALIVE) are skipped. */
plait_result_t plait_control_recv(plait_control_t *c, int peer, plait_msg_type_t type,
                                  plait_frame_t *out);

/* The same for a caller that polled the connection readable: a heartbeat is
 * returned as it is (out->type == PLAIT_MSG_ALIVE, no payload) rather than
 * waiting for the frame after it. */
plait_result_t plait_control_recv_polled(plait_control_t *c, int peer, plait_msg_type_t type,
                                         plait_frame_t *out);

/* Rank 0: receives one frame of type `type` from every rank > 0 (frames[r]),
 * in whatever order they come (heartbeats skipped). A lost or silent rank
 * fails the job. */
plait_result_t plait_control_gather(plait_control_t *c, plait_msg_type_t type,
                                    plait_frame_t *frames);

/* Marks the control plane failed with the current last error; rank 0 sends
 * ABORT (code, message) to every rank still connected. Returns rc. */
plait_result_t plait_control_fail(plait_control_t *c, plait_result_t rc);

/* For a caller that waits on the control plane and its own descriptors in one
 * poll(): a pollfd for input from peer (rank 0: any rank > 0; others: 0). */
struct pollfd plait_control_pollfd(const plait_control_t *c, int peer);
/* 1 when input from peer (a frame, or the connection closing) is waiting. */
int plait_control_readable(const plait_control_t *c, int peer);

/* While learning who failed, past the sticky failure: reads peer's next frame
 * of any type by deadline (plait_now() seconds), naming `who` in errors; and
 * sends a finished frame to peer by deadline (best effort: the result says
 * whether it went). */
plait_result_t plait_control_recv_any(plait_control_t *c, int peer, double deadline,
                                      const char *who, plait_frame_t *out);
plait_result_t plait_control_send_by(plait_control_t *c, int peer, const plait_writer_t *w,
                                     double deadline);

/* One heartbeat (PLAIT_MSG_ALIVE, no payload) to each connection of this
 * rank (rank 0: every rank; others: rank 0), for the engine's liveness thread
 * while the coordinator thread does not use the control plane. Never blocks
 * on a full socket buffer: a peer whose buffer cannot take the frame at once
 * is skipped (a frame begun is finished within 1 s). Returns 1 when the
 * heartbeat went out, 0 when the control plane failed or has no connections,
 * or the frame could not be made. */
int plait_control_send_heartbeat(plait_control_t *c);

void plait_frame_free(plait_frame_t *f);
void plait_control_close(plait_control_t *c);

/* Used by the handshake files. */
plait_result_t plait_control_accept_all(plait_control_t *c, char (*hosts)[PLAIT_HOST_MAX],
                                        int *local_ranks, int *local_sizes);
plait_result_t plait_control_join(plait_control_t *c, const plait_topology_t *t);
/* Reads one frame from fd (max payload, deadline); names `who` in errors. */
plait_result_t plait_control_read_frame(int fd, uint32_t max_payload, double deadline,
                                        const char *who, plait_frame_t *out);

#endif
