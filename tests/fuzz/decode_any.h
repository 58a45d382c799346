/*
 * The fuzzers' "decode a whole frame of any type": the negotiation messages
 * (REQUESTS, RESPONSES) through the engine's decoders, every other type
 * through plait_msg_decode_frame (src/control/messages.c). Written here, not
 * taken from either layer, so that it does not depend on which layer
 * dispatches which type.
 */
#ifndef PLAIT_FUZZ_DECODE_ANY_H
#define PLAIT_FUZZ_DECODE_ANY_H

#include "control/messages.h"
#include "control/wire.h"
#include "engine/negotiation_msgs.h"

static inline plait_result_t fuzz_decode_any(const uint8_t *frame, size_t len) {
  plait_frame_header_t h;
  if (len < PLAIT_WIRE_HEADER_SIZE ||
      plait_wire_decode_header(frame, PLAIT_WIRE_MAX_PAYLOAD, &h) != PLAIT_SUCCESS ||
      h.length != len - PLAIT_WIRE_HEADER_SIZE ||
      (h.type != PLAIT_MSG_REQUESTS && h.type != PLAIT_MSG_RESPONSES))
    return plait_msg_decode_frame(frame, len); /* also says what is wrong with a header */
  const uint8_t *p = frame + PLAIT_WIRE_HEADER_SIZE;
  plait_result_t rc;
  if (h.type == PLAIT_MSG_REQUESTS) {
    plait_request_list_t l;
    rc = plait_requests_decode(p, h.length, &l);
    if (rc == PLAIT_SUCCESS) plait_requests_free(&l);
  } else {
    plait_response_list_t l;
    rc = plait_responses_decode(p, h.length, &l);
    if (rc == PLAIT_SUCCESS) plait_responses_free(&l);
  }
  return rc;
}

#endif
