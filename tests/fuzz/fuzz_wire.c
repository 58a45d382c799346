/*
 * libFuzzer harness: the control-plane decoder. The input is one whole frame
 * (12-byte header and payload) as it would arrive from the network; every
 * message type is decoded by plait_msg_decode_frame, which must fail cleanly
 * (PLAIT_ERR_PROTOCOL) on anything malformed, never read out of bounds, leak
 * or crash. Run with ci/fuzz; seeds in tests/fuzz/corpus/wire.
 */
#include "control/messages.h"
#include "control/wire.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The header alone, as the reader checks it before taking the payload. */
  if (size >= PLAIT_WIRE_HEADER_SIZE) {
    plait_frame_header_t h;
    (void)plait_wire_decode_header(data, PLAIT_WIRE_MAX_PAYLOAD, &h);
  }
  plait_result_t rc = plait_msg_decode_frame(data, size);
  if (rc != PLAIT_SUCCESS && rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY)
    __builtin_trap(); /* a decoder may only say "malformed" (or out of memory) */
  return 0;
}
