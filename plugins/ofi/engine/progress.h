/*
 * The progress engine: posting tagged sends and receives, reading the
 * completion queue, and waiting with a timeout.
 *
 * libfabric's rxm and shm providers need manual progress: nothing moves
 * unless the completion queue is read. So every wait here reads it in a
 * loop; -FI_EAGAIN from a post is retried after reading it; -FI_EAVAIL is
 * turned into an error with fi_cq_readerr's text and the peer's rank.
 *
 * A peer that dies or hangs must not hang this rank: a wait fails with
 * PLAIT_ERR_PEER_LOST when no completion arrived for PLAIT_TIMEOUT_S, and
 * sooner when a peer on this host is seen to have exited (its pid, checked
 * while a wait is idle).
 *
 * Tags: [4 bits communicator][12 bits collective number][20 bits sender's
 * rank][24 bits id chosen by the algorithm], so messages of different
 * communicators (init's state and its subsets, see subset.c), collectives,
 * senders or steps never match each other's receives. A sender runs at most
 * a few collectives ahead of a receiver, far fewer than 4096.
 */
#ifndef PLAIT_OFI_PROGRESS_H
#define PLAIT_OFI_PROGRESS_H

#include <sys/uio.h>

#include "state.h"

#define OFI_TAG_ID_BITS 24
#define OFI_TAG_ID_MAX ((1u << OFI_TAG_ID_BITS) - 1)

double ofi_now(void);

/* Starts a collective: a new collective number, a fresh timeout. */
void ofi_begin(ofi_state_t *st, const char *op);

/* Posts a send of len bytes to peer (tag id `id`); retries -FI_EAGAIN.
 * Small messages are injected: req is then done at once (and queued as
 * completed). desc is the buffer's registration (NULL when none needed). */
plait_result_t ofi_post_send(ofi_state_t *st, ofi_req_t *req, int peer, const void *buf,
                             size_t len, void *desc, uint32_t id);
plait_result_t ofi_post_recv(ofi_state_t *st, ofi_req_t *req, int peer, void *buf, size_t len,
                             void *desc, uint32_t id);
/* ofi_post_send, giving up at deadline (ofi_now()) while the provider says
 * -FI_EAGAIN: PLAIT_ERR_TIMEOUT then, nothing posted, nothing recorded. */
plait_result_t ofi_post_send_until(ofi_state_t *st, ofi_req_t *req, int peer, const void *buf,
                                   size_t len, void *desc, uint32_t id, double deadline);

/* The most pieces one message of ofi_post_sendv / ofi_post_recvv takes;
 * the provider's own limit (state.h: iov_limit) may be lower. */
#define OFI_IOV_MAX 16

/* Like ofi_post_send / ofi_post_recv, for n pieces (n <= st->iov_limit) of
 * memory that needs no registration, sent and received as one message. */
plait_result_t ofi_post_sendv(ofi_state_t *st, ofi_req_t *req, int peer, const struct iovec *iov,
                              size_t n, uint32_t id);
plait_result_t ofi_post_recvv(ofi_state_t *st, ofi_req_t *req, int peer, const struct iovec *iov,
                              size_t n, uint32_t id);

/* Reads the completion queue once (moves the provider's data, marks a turn
 * of the progress loop for the watchdog), between long local work. */
plait_result_t ofi_progress(ofi_state_t *st);

/* The job's rank of peer (a subset's members are numbered from 0), for
 * messages. */
int ofi_job_rank(const ofi_state_t *st, int peer);

/* Waits for the next completed request and returns it (FIFO). */
plait_result_t ofi_wait_any(ofi_state_t *st, ofi_req_t **out);

/* Waits until every one of reqs[0..n) that was posted is done (requests
 * zeroed and never posted are skipped). Forgets other completions. */
plait_result_t ofi_wait_all(ofi_state_t *st, ofi_req_t *reqs, size_t n);

/* ofi_wait_all until ofi_now() reaches deadline: PLAIT_ERR_TIMEOUT then,
 * the requests still posted (not a failure, nothing recorded). */
plait_result_t ofi_wait_all_until(ofi_state_t *st, ofi_req_t *reqs, size_t n, double deadline);

#endif
