/*
 * Internal: the elastic rendezvous's messages, between a worker
 * (control/elastic_client.h) and plaitrun's driver
 * (plaitrun/elastic/rendezvous.c). Frames are those of wire.h, at most
 * PLAIT_EL_MAX_PAYLOAD bytes. A connection opens as the control plane's does,
 * with labels of its own (auth.h: PLAIT_AUTH_ELASTIC_WORKER/DRIVER):
 *   driver: HELLO{nonce}
 *   worker: AUTH{rank 0, size 0, nonce, MAC, host = worker name, epoch}
 *   driver: WELCOME{MAC} or REJECT{why}
 * then one request and its answer:
 *   worker: JOIN{worker, last_epoch, rendezvous, lost ranks}
 *   driver: ASSIGN{epoch, rank, size, local, cross, rendezvous} or STOP{why}
 * or
 *   worker: POLL{epoch}
 *   driver: UPDATES{timestamp, update bits}
 * Decoders check every field (ranks against the size, bits against those
 * defined, lengths against their limits) and fail with PLAIT_ERR_PROTOCOL
 * naming the message and the field.
 */
#ifndef PLAIT_ELASTIC_WIRE_H
#define PLAIT_ELASTIC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "control/wire.h"

#define PLAIT_EL_MAX_PAYLOAD 4096 /* every elastic frame, the handshake's too */
#define PLAIT_EL_WORKER_MAX 128   /* "host/slot", with its NUL */
#define PLAIT_EL_ADDR_MAX 96      /* "addr:port" or "[v6]:port", with its NUL */
#define PLAIT_EL_LOST_MAX 64      /* lost ranks one JOIN carries */
#define PLAIT_EL_TEXT_MAX 1024    /* STOP's reason, with its NUL */
#define PLAIT_EL_UPDATE_BITS 3u   /* PLAIT_HOSTS_ADDED | PLAIT_HOSTS_REMOVED */

typedef struct {
  char worker[PLAIT_EL_WORKER_MAX];
  uint64_t last_epoch; /* 0: never ran */
  char rendezvous[PLAIT_EL_ADDR_MAX];
  uint32_t n_lost;
  int32_t lost[PLAIT_EL_LOST_MAX]; /* ranks of last_epoch, each >= 0 */
} plait_el_join_t;

typedef struct {
  uint64_t epoch; /* >= 1 */
  int32_t rank, size, local_rank, local_size, cross_rank, cross_size;
  char rendezvous[PLAIT_EL_ADDR_MAX];
} plait_el_assign_t;

typedef struct {
  uint64_t timestamp;
  uint32_t update; /* PLAIT_HOSTS_* bits */
} plait_el_updates_t;

plait_result_t plait_el_encode_join(plait_writer_t *w, const plait_el_join_t *m);
plait_result_t plait_el_encode_assign(plait_writer_t *w, const plait_el_assign_t *m);
plait_result_t plait_el_encode_stop(plait_writer_t *w, const char *reason);
plait_result_t plait_el_encode_poll(plait_writer_t *w, uint64_t epoch);
plait_result_t plait_el_encode_updates(plait_writer_t *w, const plait_el_updates_t *m);

plait_result_t plait_el_decode_join(const uint8_t *p, size_t n, plait_el_join_t *m);
plait_result_t plait_el_decode_assign(const uint8_t *p, size_t n, plait_el_assign_t *m);
/* reason: PLAIT_EL_TEXT_MAX bytes. */
plait_result_t plait_el_decode_stop(const uint8_t *p, size_t n, char *reason);
plait_result_t plait_el_decode_poll(const uint8_t *p, size_t n, uint64_t *epoch);
plait_result_t plait_el_decode_updates(const uint8_t *p, size_t n, plait_el_updates_t *m);

/* Decodes the payload of an elastic frame of type `type` (fuzzing's entry,
 * through plait_msg_decode_frame). */
plait_result_t plait_el_decode_any(uint16_t type, const uint8_t *p, size_t n);

#endif
