/*
 * libFuzzer harness: the control-plane decoder. The input is one whole frame
 * (12-byte header and payload) as it would arrive from the network; every
 * message type is decoded by plait_neg_decode_frame, which must fail cleanly
 * (PLAIT_ERR_PROTOCOL) on anything malformed, never read out of bounds, leak
 * or crash.
 *
 * A frame that decodes is also encoded again from what was decoded, with
 * plait's own encoders: that frame must decode too, and encoding it once more
 * must give the same bytes (the encoders and decoders agree on every value
 * the decoders let through). A RELAYED frame (up the control tree) is also read
 * as rank 0 reads one: each origin checked against the tree, each payload
 * decoded. Run with ci/fuzz; seeds in tests/fuzz/corpus/wire.
 */
#include "control/elastic_wire.h"
#include "control/control.h"
#include "control/messages.h"
#include "control/tree.h"
#include "control/wire.h"
#include "engine/negotiate/messages.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void finding(const char *what) {
  fprintf(stderr, "fuzz_wire: %s\n", what);
  __builtin_trap();
}

static plait_result_t reencode_topology(const uint8_t *p, size_t n, plait_writer_t *w) {
  uint32_t size = n >= 4 ? plait_load_le32(p) : 0;
  if (size == 0 || size > (n - 4) / 12) return PLAIT_ERR_PROTOCOL;
  plait_msg_topology_t m = {size, calloc(size, PLAIT_HOST_MAX), calloc(size, sizeof(int32_t)),
                            calloc(size, sizeof(int32_t))};
  plait_result_t rc = PLAIT_ERR_NO_MEMORY;
  if (m.hosts && m.local_ranks && m.local_sizes) {
    rc = plait_msg_decode_topology(p, n, &m);
    if (rc == PLAIT_SUCCESS) rc = plait_msg_encode_topology(w, &m);
  }
  free(m.hosts);
  free(m.local_ranks);
  free(m.local_sizes);
  return rc;
}

static plait_result_t reencode_negotiation(uint16_t type, const uint8_t *p, size_t n,
                                           plait_writer_t *w) {
  plait_result_t rc;
  if (type == PLAIT_MSG_REQUESTS) {
    plait_request_list_t l;
    uint32_t code = 0;
    char *text = NULL; /* a failure report's error and message */
    rc = plait_requests_decode_failure(p, n, &l, &code, &text);
    if (rc == PLAIT_SUCCESS) {
      rc = plait_requests_encode_failure(w, &l, code, text);
      plait_requests_free(&l);
      free(text);
    }
  } else {
    plait_response_list_t l;
    rc = plait_responses_decode(p, n, &l);
    if (rc == PLAIT_SUCCESS) {
      rc = plait_responses_encode(w, &l);
      plait_responses_free(&l);
    }
  }
  return rc;
}

/* The elastic rendezvous's messages (control/elastic_wire.h). */
static plait_result_t reencode_elastic(uint16_t type, const uint8_t *p, size_t n,
                                       plait_writer_t *w) {
  union {
    plait_el_join_t join;
    plait_el_assign_t assign;
    plait_el_updates_t updates;
    char reason[PLAIT_EL_TEXT_MAX];
    uint64_t epoch;
  } u;
  plait_result_t rc;
  switch (type) {
  case PLAIT_MSG_EL_JOIN:
    rc = plait_el_decode_join(p, n, &u.join);
    return rc ? rc : plait_el_encode_join(w, &u.join);
  case PLAIT_MSG_EL_ASSIGN:
    rc = plait_el_decode_assign(p, n, &u.assign);
    return rc ? rc : plait_el_encode_assign(w, &u.assign);
  case PLAIT_MSG_EL_STOP:
    rc = plait_el_decode_stop(p, n, u.reason);
    return rc ? rc : plait_el_encode_stop(w, u.reason);
  case PLAIT_MSG_EL_POLL:
    rc = plait_el_decode_poll(p, n, &u.epoch);
    return rc ? rc : plait_el_encode_poll(w, u.epoch);
  default:
    rc = plait_el_decode_updates(p, n, &u.updates);
    return rc ? rc : plait_el_encode_updates(w, &u.updates);
  }
}

/* A message type added after this harness: decoded, not encoded again. */
#define NOT_COVERED ((plait_result_t)-1)

/* Decodes frame (known to be whole) and encodes what it got into w. */
static plait_result_t reencode(const uint8_t *frame, size_t len, plait_writer_t *w) {
  plait_frame_header_t h;
  plait_result_t rc = plait_wire_decode_header(frame, PLAIT_WIRE_MAX_PAYLOAD, &h);
  if (rc != PLAIT_SUCCESS) return rc;
  const uint8_t *p = frame + PLAIT_WIRE_HEADER_SIZE;
  size_t n = len - PLAIT_WIRE_HEADER_SIZE;
  union {
    plait_msg_hello_t hello;
    plait_msg_auth_t auth;
    plait_msg_welcome_t welcome;
    plait_msg_text_t text;
    plait_msg_boot_data_t boot;
    plait_msg_boot_result_t result;
  } u;
  memset(&u, 0, sizeof u);
  switch (h.type) {
  case PLAIT_MSG_HELLO:
    rc = plait_msg_decode_hello(p, n, &u.hello);
    return rc ? rc : plait_msg_encode_hello(w, &u.hello);
  case PLAIT_MSG_AUTH:
    rc = plait_msg_decode_auth(p, n, &u.auth);
    return rc ? rc : plait_msg_encode_auth(w, &u.auth);
  case PLAIT_MSG_WELCOME:
    rc = plait_msg_decode_welcome(p, n, &u.welcome);
    return rc ? rc : plait_msg_encode_welcome(w, &u.welcome);
  case PLAIT_MSG_REJECT:
    rc = plait_msg_decode_text(p, n, 0, &u.text);
    return rc ? rc : plait_msg_encode_reject(w, u.text.text);
  case PLAIT_MSG_ABORT:
    rc = plait_msg_decode_text(p, n, 1, &u.text);
    return rc ? rc : plait_msg_encode_abort(w, u.text.code, u.text.text);
  case PLAIT_MSG_TOPOLOGY: return reencode_topology(p, n, w);
  case PLAIT_MSG_BOOT_DATA:
    rc = plait_msg_decode_boot_data(p, n, &u.boot);
    return rc ? rc : plait_msg_encode_boot_data(w, &u.boot);
  case PLAIT_MSG_BOOT_RESULT:
    rc = plait_msg_decode_boot_result(p, n, &u.result);
    return rc ? rc : plait_msg_encode_boot_result(w, &u.result);
  case PLAIT_MSG_REQUESTS:
  case PLAIT_MSG_RESPONSES: return reencode_negotiation(h.type, p, n, w);
  case PLAIT_MSG_EL_JOIN:
  case PLAIT_MSG_EL_ASSIGN:
  case PLAIT_MSG_EL_STOP:
  case PLAIT_MSG_EL_POLL:
  case PLAIT_MSG_EL_UPDATES: return reencode_elastic(h.type, p, n, w);
  }
  return NOT_COVERED;
}

/* One payload a RELAYED frame carries: another rank's REQUESTS payload, as
 * rank 0 decodes it. */
static plait_result_t decode_relayed(void *arg, int origin, const uint8_t *p, size_t n) {
  (void)arg;
  (void)origin;
  plait_request_list_t l;
  uint32_t code = 0;
  char *text = NULL;
  plait_result_t rc = plait_requests_decode_failure(p, n, &l, &code, &text);
  if (rc == PLAIT_SUCCESS) plait_requests_free(&l);
  free(text);
  return rc;
}

/* An AND of a cached id in a RELAYED frame (engine/negotiate/tree_and.h), as rank 0
 * takes it: its root, id and acked count, already checked by the reader. */
static plait_result_t take_and(void *arg, const plait_tree_and_t *a) {
  (void)arg;
  if (a->id < 0 || a->root < 1 || a->root >= 64) finding("an AND item passed with a bad field");
  return PLAIT_SUCCESS;
}

/* A RELAYED frame (up the control tree, control/tree.h) as rank 0 reads one
 * from its child rank 1 in a job of 64 ranks with fan-out 4: the origins
 * checked against the tree, each payload decoded, each AND item read. */
static void relayed(const uint8_t *data, size_t size) {
  plait_frame_header_t h;
  if (size < PLAIT_WIRE_HEADER_SIZE ||
      plait_wire_decode_header(data, PLAIT_WIRE_MAX_PAYLOAD, &h) != PLAIT_SUCCESS ||
      h.type != PLAIT_MSG_RELAYED || h.length != size - PLAIT_WIRE_HEADER_SIZE)
    return;
  plait_control_t c;
  memset(&c, 0, sizeof c);
  c.size = 64;
  c.tree.fanout = 4;
  plait_frame_t f = {h.type, h.length, (uint8_t *)data + PLAIT_WIRE_HEADER_SIZE};
  plait_result_t rc = plait_tree_each_item(&c, 1, &f, decode_relayed, take_and, NULL);
  if (rc != PLAIT_SUCCESS && rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY)
    finding("a relayed frame failed with another error than PROTOCOL or NO_MEMORY");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  relayed(data, size);
  /* The header alone, as the reader checks it before taking the payload. */
  if (size >= PLAIT_WIRE_HEADER_SIZE) {
    plait_frame_header_t h;
    (void)plait_wire_decode_header(data, PLAIT_WIRE_MAX_PAYLOAD, &h);
  }
  plait_result_t rc = plait_neg_decode_frame(data, size);
  if (rc != PLAIT_SUCCESS && rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY)
    finding("a decoder failed with another error than PROTOCOL or NO_MEMORY");
  if (rc != PLAIT_SUCCESS) return 0;
  plait_writer_t once = {0}, twice = {0};
  rc = reencode(data, size, &once);
  if (rc == NOT_COVERED) return 0;
  if (rc != PLAIT_SUCCESS)
    finding("a frame that decodes cannot be encoded again from what was decoded");
  if (plait_neg_decode_frame(once.data, once.len) != PLAIT_SUCCESS)
    finding("the encoders wrote a frame the decoders refuse");
  if (reencode(once.data, once.len, &twice) != PLAIT_SUCCESS || once.len != twice.len ||
      memcmp(once.data, twice.data, once.len) != 0)
    finding("encode(decode(encode(decode(frame)))) differs from encode(decode(frame))");
  plait_wr_free(&once);
  plait_wr_free(&twice);
  return 0;
}
