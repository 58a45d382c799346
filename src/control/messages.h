/*
 * Internal: every control-plane message, its encoder and its decoder. The
 * decoders are the only code that reads bytes from the network; each checks
 * every field against the payload's end and fails with PLAIT_ERR_PROTOCOL
 * ("malformed <message>") rather than read out of bounds. Decoded pointers
 * (data) point into the payload they were decoded from.
 */
#ifndef PLAIT_MESSAGES_H
#define PLAIT_MESSAGES_H

#include "control/topology.h"
#include "control/wire.h"

#define PLAIT_MSG_TEXT_MAX 1024

typedef struct {
  uint8_t nonce[PLAIT_WIRE_NONCE_SIZE];
} plait_msg_hello_t;

typedef struct {
  uint32_t rank, size;
  uint8_t nonce[PLAIT_WIRE_NONCE_SIZE];
  uint8_t mac[PLAIT_WIRE_MAC_SIZE];
  char host[PLAIT_HOST_MAX];
  int32_t local_rank, local_size; /* from the launcher; -1 unknown */
  uint64_t epoch; /* elastic job's epoch; 0: not elastic, and not on the wire (the frame of
                     old, byte for byte), else a trailing u64 */
} plait_msg_auth_t;

typedef struct {
  uint8_t mac[PLAIT_WIRE_MAC_SIZE];
} plait_msg_welcome_t;

/* REJECT and ABORT: a code (0 for REJECT) and a message. */
typedef struct {
  uint32_t code;
  char text[PLAIT_MSG_TEXT_MAX];
} plait_msg_text_t;

/* TOPOLOGY: every rank's host identity and launcher-given local rank/size. */
typedef struct {
  uint32_t size;
  char (*hosts)[PLAIT_HOST_MAX]; /* size entries, caller-provided */
  int32_t *local_ranks, *local_sizes;
} plait_msg_topology_t;

typedef struct {
  uint32_t seq;
  uint8_t kind;
  int32_t root;
  uint64_t bytes;
  const uint8_t *data;
  size_t data_len;
} plait_msg_boot_data_t;

typedef struct {
  uint32_t seq, status;
  char text[PLAIT_MSG_TEXT_MAX];
  const uint8_t *data;
  size_t data_len;
} plait_msg_boot_result_t;

/* Encoders: begin the frame, write the fields, end it (the result of
 * plait_wr_end). */
plait_result_t plait_msg_encode_hello(plait_writer_t *w, const plait_msg_hello_t *m);
plait_result_t plait_msg_encode_auth(plait_writer_t *w, const plait_msg_auth_t *m);
plait_result_t plait_msg_encode_welcome(plait_writer_t *w, const plait_msg_welcome_t *m);
plait_result_t plait_msg_encode_reject(plait_writer_t *w, const char *why);
plait_result_t plait_msg_encode_abort(plait_writer_t *w, uint32_t code, const char *why);
plait_result_t plait_msg_encode_topology(plait_writer_t *w, const plait_msg_topology_t *m);
plait_result_t plait_msg_encode_boot_data(plait_writer_t *w, const plait_msg_boot_data_t *m);
plait_result_t plait_msg_encode_boot_result(plait_writer_t *w, const plait_msg_boot_result_t *m);

/* Decoders over one payload. */
plait_result_t plait_msg_decode_hello(const uint8_t *p, size_t n, plait_msg_hello_t *m);
plait_result_t plait_msg_decode_auth(const uint8_t *p, size_t n, plait_msg_auth_t *m);
plait_result_t plait_msg_decode_welcome(const uint8_t *p, size_t n, plait_msg_welcome_t *m);
plait_result_t plait_msg_decode_text(const uint8_t *p, size_t n, int with_code,
                                     plait_msg_text_t *m);
/* m->size must be set to the expected job size, arrays allocated by caller. */
plait_result_t plait_msg_decode_topology(const uint8_t *p, size_t n, plait_msg_topology_t *m);
plait_result_t plait_msg_decode_boot_data(const uint8_t *p, size_t n, plait_msg_boot_data_t *m);
plait_result_t plait_msg_decode_boot_result(const uint8_t *p, size_t n,
                                            plait_msg_boot_result_t *m);

/* Decodes a whole frame (header and payload, len bytes) of any control-plane
 * type. The negotiation payloads (PLAIT_MSG_REQUESTS, PLAIT_MSG_RESPONSES)
 * are the engine's: this refuses them (PLAIT_ERR_PROTOCOL saying so), and
 * plait_neg_decode_frame (engine/negotiate/messages.h) decodes a frame of any
 * type, the entry point for fuzzing. */
plait_result_t plait_msg_decode_frame(const uint8_t *frame, size_t len);

#endif
