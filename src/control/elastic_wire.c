/* Encoders and bounds-checked decoders of the elastic rendezvous's messages
 * (elastic_wire.h). */
#include "control/elastic_wire.h"

#include <string.h>

#include "util/error.h"

/* Strings longer than their field are refused at encoding (plait_wr_fits),
 * never cut: a cut address or name would reach the wrong place. */
static void wr_field(plait_writer_t *w, const char *s, size_t cap, const char *what) {
  size_t n = strnlen(s, cap);
  plait_wr_fits(w, n < cap, what);
  plait_wr_blob(w, s, n < cap ? n : 0);
}

plait_result_t plait_el_encode_join(plait_writer_t *w, const plait_el_join_t *m) {
  plait_wr_begin(w, PLAIT_MSG_EL_JOIN);
  wr_field(w, m->worker, sizeof m->worker, "the worker's name (at most 127 bytes)");
  plait_wr_u64(w, m->last_epoch);
  wr_field(w, m->rendezvous, sizeof m->rendezvous, "the rendezvous address (at most 95 bytes)");
  plait_wr_fits(w, m->n_lost <= PLAIT_EL_LOST_MAX, "the lost ranks (at most 64)");
  uint32_t n = m->n_lost <= PLAIT_EL_LOST_MAX ? m->n_lost : 0;
  plait_wr_u32(w, n);
  for (uint32_t i = 0; i < n; i++) plait_wr_i32(w, m->lost[i]);
  return plait_wr_end(w);
}

plait_result_t plait_el_encode_assign(plait_writer_t *w, const plait_el_assign_t *m) {
  plait_wr_begin(w, PLAIT_MSG_EL_ASSIGN);
  plait_wr_u64(w, m->epoch);
  plait_wr_i32(w, m->rank);
  plait_wr_i32(w, m->size);
  plait_wr_i32(w, m->local_rank);
  plait_wr_i32(w, m->local_size);
  plait_wr_i32(w, m->cross_rank);
  plait_wr_i32(w, m->cross_size);
  wr_field(w, m->rendezvous, sizeof m->rendezvous, "the rendezvous address (at most 95 bytes)");
  return plait_wr_end(w);
}

plait_result_t plait_el_encode_stop(plait_writer_t *w, const char *reason) {
  plait_wr_begin(w, PLAIT_MSG_EL_STOP);
  size_t n = reason ? strlen(reason) : 0; /* a reason is cut, not refused */
  plait_wr_blob(w, reason, n < PLAIT_EL_TEXT_MAX ? n : PLAIT_EL_TEXT_MAX - 1);
  return plait_wr_end(w);
}

plait_result_t plait_el_encode_poll(plait_writer_t *w, uint64_t epoch) {
  plait_wr_begin(w, PLAIT_MSG_EL_POLL);
  plait_wr_u64(w, epoch);
  return plait_wr_end(w);
}

plait_result_t plait_el_encode_updates(plait_writer_t *w, const plait_el_updates_t *m) {
  plait_wr_begin(w, PLAIT_MSG_EL_UPDATES);
  plait_wr_u64(w, m->timestamp);
  plait_wr_u32(w, m->update);
  return plait_wr_end(w);
}

static plait_result_t bad_field(const char *msg, const char *field) {
  return plait_error(PLAIT_ERR_PROTOCOL, "malformed elastic %s: %s", msg, field);
}

plait_result_t plait_el_decode_join(const uint8_t *p, size_t n, plait_el_join_t *m) {
  plait_reader_t r;
  memset(m, 0, sizeof *m);
  plait_rd_init(&r, p, n);
  plait_rd_str(&r, m->worker, sizeof m->worker);
  m->last_epoch = plait_rd_u64(&r);
  plait_rd_str(&r, m->rendezvous, sizeof m->rendezvous);
  m->n_lost = plait_rd_u32(&r);
  if (!r.bad && m->n_lost > PLAIT_EL_LOST_MAX) return bad_field("JOIN", "more than 64 lost ranks");
  for (uint32_t i = 0; i < m->n_lost && !r.bad; i++) {
    m->lost[i] = plait_rd_i32(&r);
    if (!r.bad && m->lost[i] < 0) return bad_field("JOIN", "a negative lost rank");
  }
  PLAIT_CHECK(plait_rd_finish(&r, "elastic JOIN"));
  if (!m->worker[0]) return bad_field("JOIN", "the worker's name is empty");
  if (!m->rendezvous[0]) return bad_field("JOIN", "the rendezvous address is empty");
  return PLAIT_SUCCESS;
}

plait_result_t plait_el_decode_assign(const uint8_t *p, size_t n, plait_el_assign_t *m) {
  plait_reader_t r;
  memset(m, 0, sizeof *m);
  plait_rd_init(&r, p, n);
  m->epoch = plait_rd_u64(&r);
  m->rank = plait_rd_i32(&r);
  m->size = plait_rd_i32(&r);
  m->local_rank = plait_rd_i32(&r);
  m->local_size = plait_rd_i32(&r);
  m->cross_rank = plait_rd_i32(&r);
  m->cross_size = plait_rd_i32(&r);
  plait_rd_str(&r, m->rendezvous, sizeof m->rendezvous);
  PLAIT_CHECK(plait_rd_finish(&r, "elastic ASSIGN"));
  if (!m->epoch) return bad_field("ASSIGN", "epoch 0");
  if (m->size < 1 || m->rank < 0 || m->rank >= m->size)
    return bad_field("ASSIGN", "the rank is not below the size");
  if (m->local_size < 1 || m->local_size > m->size || m->local_rank < 0 ||
      m->local_rank >= m->local_size)
    return bad_field("ASSIGN", "the local rank is not below the local size");
  if (m->cross_size < 1 || m->cross_size > m->size || m->cross_rank < 0 ||
      m->cross_rank >= m->cross_size)
    return bad_field("ASSIGN", "the cross rank is not below the cross size");
  if (!m->rendezvous[0]) return bad_field("ASSIGN", "the rendezvous address is empty");
  return PLAIT_SUCCESS;
}

plait_result_t plait_el_decode_stop(const uint8_t *p, size_t n, char *reason) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  plait_rd_str(&r, reason, PLAIT_EL_TEXT_MAX);
  return plait_rd_finish(&r, "elastic STOP");
}

plait_result_t plait_el_decode_poll(const uint8_t *p, size_t n, uint64_t *epoch) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  *epoch = plait_rd_u64(&r);
  return plait_rd_finish(&r, "elastic POLL");
}

plait_result_t plait_el_decode_updates(const uint8_t *p, size_t n, plait_el_updates_t *m) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  m->timestamp = plait_rd_u64(&r);
  m->update = plait_rd_u32(&r);
  PLAIT_CHECK(plait_rd_finish(&r, "elastic UPDATES"));
  if (m->update & ~PLAIT_EL_UPDATE_BITS) return bad_field("UPDATES", "unknown update bits");
  return PLAIT_SUCCESS;
}

plait_result_t plait_el_decode_any(uint16_t type, const uint8_t *p, size_t n) {
  union {
    plait_el_join_t join;
    plait_el_assign_t assign;
    plait_el_updates_t updates;
    char reason[PLAIT_EL_TEXT_MAX];
    uint64_t epoch;
  } u;
  switch (type) {
  case PLAIT_MSG_EL_JOIN: return plait_el_decode_join(p, n, &u.join);
  case PLAIT_MSG_EL_ASSIGN: return plait_el_decode_assign(p, n, &u.assign);
  case PLAIT_MSG_EL_STOP: return plait_el_decode_stop(p, n, u.reason);
  case PLAIT_MSG_EL_POLL: return plait_el_decode_poll(p, n, &u.epoch);
  case PLAIT_MSG_EL_UPDATES: return plait_el_decode_updates(p, n, &u.updates);
  }
  return plait_error(PLAIT_ERR_PROTOCOL, "message type %u is not an elastic message", type);
}
