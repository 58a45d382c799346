/* Encoders and bounds-checked decoders of the control-plane messages. */
#include "control/messages.h"

#include <stdlib.h>
#include <string.h>

#include "control/elastic_wire.h"
#include "util/error.h"

plait_result_t plait_msg_encode_hello(plait_writer_t *w, const plait_msg_hello_t *m) {
  plait_wr_begin(w, PLAIT_MSG_HELLO);
  plait_wr_raw(w, m->nonce, sizeof m->nonce);
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_auth(plait_writer_t *w, const plait_msg_auth_t *m) {
  plait_wr_begin(w, PLAIT_MSG_AUTH);
  plait_wr_u32(w, m->rank);
  plait_wr_u32(w, m->size);
  plait_wr_raw(w, m->nonce, sizeof m->nonce);
  plait_wr_raw(w, m->mac, sizeof m->mac);
  plait_wr_str(w, m->host);
  plait_wr_i32(w, m->local_rank);
  plait_wr_i32(w, m->local_size);
  if (m->epoch) plait_wr_u64(w, m->epoch);
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_welcome(plait_writer_t *w, const plait_msg_welcome_t *m) {
  plait_wr_begin(w, PLAIT_MSG_WELCOME);
  plait_wr_raw(w, m->mac, sizeof m->mac);
  return plait_wr_end(w);
}

/* Texts longer than the decoder accepts are cut here, not refused there. */
static void wr_text(plait_writer_t *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  plait_wr_blob(w, s, n < PLAIT_MSG_TEXT_MAX ? n : PLAIT_MSG_TEXT_MAX - 1);
}

plait_result_t plait_msg_encode_reject(plait_writer_t *w, const char *why) {
  plait_wr_begin(w, PLAIT_MSG_REJECT);
  wr_text(w, why);
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_abort(plait_writer_t *w, uint32_t code, const char *why) {
  plait_wr_begin(w, PLAIT_MSG_ABORT);
  plait_wr_u32(w, code);
  wr_text(w, why);
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_topology(plait_writer_t *w, const plait_msg_topology_t *m) {
  plait_wr_begin(w, PLAIT_MSG_TOPOLOGY);
  plait_wr_u32(w, m->size);
  for (uint32_t r = 0; r < m->size; r++) {
    plait_wr_str(w, m->hosts[r]);
    plait_wr_i32(w, m->local_ranks[r]);
    plait_wr_i32(w, m->local_sizes[r]);
  }
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_boot_data(plait_writer_t *w, const plait_msg_boot_data_t *m) {
  plait_wr_begin(w, PLAIT_MSG_BOOT_DATA);
  plait_wr_u32(w, m->seq);
  plait_wr_u8(w, m->kind);
  plait_wr_i32(w, m->root);
  plait_wr_u64(w, m->bytes);
  plait_wr_blob(w, m->data, m->data_len);
  return plait_wr_end(w);
}

plait_result_t plait_msg_encode_boot_result(plait_writer_t *w, const plait_msg_boot_result_t *m) {
  plait_wr_begin(w, PLAIT_MSG_BOOT_RESULT);
  plait_wr_u32(w, m->seq);
  plait_wr_u32(w, m->status);
  wr_text(w, m->text);
  plait_wr_blob(w, m->data, m->data_len);
  return plait_wr_end(w);
}

plait_result_t plait_msg_decode_hello(const uint8_t *p, size_t n, plait_msg_hello_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  plait_rd_raw(&r, m->nonce, sizeof m->nonce);
  return plait_rd_finish(&r, "challenge");
}

plait_result_t plait_msg_decode_auth(const uint8_t *p, size_t n, plait_msg_auth_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  m->rank = plait_rd_u32(&r);
  m->size = plait_rd_u32(&r);
  plait_rd_raw(&r, m->nonce, sizeof m->nonce);
  plait_rd_raw(&r, m->mac, sizeof m->mac);
  plait_rd_str(&r, m->host, sizeof m->host);
  m->local_rank = plait_rd_i32(&r);
  m->local_size = plait_rd_i32(&r);
  m->epoch = 0;
  if (!r.bad && r.len - r.pos == 8) m->epoch = plait_rd_u64(&r); /* an elastic job's */
  return plait_rd_finish(&r, "authentication message");
}

plait_result_t plait_msg_decode_welcome(const uint8_t *p, size_t n, plait_msg_welcome_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  plait_rd_raw(&r, m->mac, sizeof m->mac);
  return plait_rd_finish(&r, "welcome");
}

plait_result_t plait_msg_decode_text(const uint8_t *p, size_t n, int with_code,
                                     plait_msg_text_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  m->code = with_code ? plait_rd_u32(&r) : 0;
  plait_rd_str(&r, m->text, sizeof m->text);
  return plait_rd_finish(&r, with_code ? "abort message" : "rejection");
}

plait_result_t plait_msg_decode_topology(const uint8_t *p, size_t n, plait_msg_topology_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  if (plait_rd_u32(&r) != m->size) r.bad = 1;
  for (uint32_t i = 0; i < m->size && !r.bad; i++) {
    plait_rd_str(&r, m->hosts[i], PLAIT_HOST_MAX);
    m->local_ranks[i] = plait_rd_i32(&r);
    m->local_sizes[i] = plait_rd_i32(&r);
  }
  return plait_rd_finish(&r, "topology message");
}

plait_result_t plait_msg_decode_boot_data(const uint8_t *p, size_t n, plait_msg_boot_data_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  m->seq = plait_rd_u32(&r);
  m->kind = plait_rd_u8(&r);
  m->root = plait_rd_i32(&r);
  m->bytes = plait_rd_u64(&r);
  m->data = plait_rd_blob(&r, &m->data_len);
  return plait_rd_finish(&r, "bootstrap message");
}

plait_result_t plait_msg_decode_boot_result(const uint8_t *p, size_t n,
                                            plait_msg_boot_result_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  m->seq = plait_rd_u32(&r);
  m->status = plait_rd_u32(&r);
  plait_rd_str(&r, m->text, sizeof m->text);
  m->data = plait_rd_blob(&r, &m->data_len);
  return plait_rd_finish(&r, "bootstrap answer");
}

/* A topology of any declared size (bounded), for the fuzzer's sake. */
static plait_result_t decode_any_topology(const uint8_t *p, size_t n) {
  if (n < 4) return plait_error(PLAIT_ERR_PROTOCOL, "malformed topology message: truncated");
  uint32_t size = plait_load_le32(p);
  /* each entry takes at least 12 bytes, so a larger count cannot be genuine */
  if (size == 0 || size > (n - 4) / 12)
    return plait_error(PLAIT_ERR_PROTOCOL, "malformed topology message: %u ranks in %zu bytes",
                       size, n);
  plait_msg_topology_t m = {size, calloc(size, PLAIT_HOST_MAX), calloc(size, sizeof(int32_t)),
                            calloc(size, sizeof(int32_t))};
  plait_result_t rc = m.hosts && m.local_ranks && m.local_sizes
                          ? plait_msg_decode_topology(p, n, &m)
                          : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  free(m.hosts);
  free(m.local_ranks);
  free(m.local_sizes);
  return rc;
}

plait_result_t plait_msg_decode_frame(const uint8_t *frame, size_t len) {
  if (len < PLAIT_WIRE_HEADER_SIZE)
    return plait_error(PLAIT_ERR_PROTOCOL, "frame of %zu bytes is shorter than a header", len);
  plait_frame_header_t h;
  PLAIT_CHECK(plait_wire_decode_header(frame, PLAIT_WIRE_MAX_PAYLOAD, &h));
  if (h.length != len - PLAIT_WIRE_HEADER_SIZE)
    return plait_error(PLAIT_ERR_PROTOCOL, "frame says %u payload bytes, %zu present", h.length,
                       len - PLAIT_WIRE_HEADER_SIZE);
  const uint8_t *p = frame + PLAIT_WIRE_HEADER_SIZE;
  union {
    plait_msg_hello_t hello;
    plait_msg_auth_t auth;
    plait_msg_welcome_t welcome;
    plait_msg_text_t text;
    plait_msg_boot_data_t boot;
    plait_msg_boot_result_t result;
  } u;
  switch (h.type) {
  case PLAIT_MSG_HELLO: return plait_msg_decode_hello(p, h.length, &u.hello);
  case PLAIT_MSG_AUTH: return plait_msg_decode_auth(p, h.length, &u.auth);
  case PLAIT_MSG_WELCOME: return plait_msg_decode_welcome(p, h.length, &u.welcome);
  case PLAIT_MSG_REJECT: return plait_msg_decode_text(p, h.length, 0, &u.text);
  case PLAIT_MSG_ABORT: return plait_msg_decode_text(p, h.length, 1, &u.text);
  case PLAIT_MSG_TOPOLOGY: return decode_any_topology(p, h.length);
  case PLAIT_MSG_BOOT_DATA: return plait_msg_decode_boot_data(p, h.length, &u.boot);
  case PLAIT_MSG_BOOT_RESULT: return plait_msg_decode_boot_result(p, h.length, &u.result);
  case PLAIT_MSG_EL_JOIN:
  case PLAIT_MSG_EL_ASSIGN:
  case PLAIT_MSG_EL_STOP:
  case PLAIT_MSG_EL_POLL:
  case PLAIT_MSG_EL_UPDATES:
    return plait_el_decode_any(h.type, p, h.length);
  case PLAIT_MSG_REQUESTS:
  case PLAIT_MSG_RESPONSES:
    return plait_error(PLAIT_ERR_PROTOCOL, "message type %u carries negotiation, which the "
                       "engine decodes (plait_neg_decode_frame)", h.type);
  }
  return plait_error(PLAIT_ERR_PROTOCOL, "unknown message type %u", h.type);
}
