/* Encoders and bounds-checked decoders of REQUESTS and RESPONSES. */
#include "negotiation_msgs.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

#define MAX_ITEMS (1u << 24) /* no list is longer; a bigger count is malformed */

void plait_meta_encode(plait_writer_t *w, const plait_meta_t *m) {
  plait_wr_u8(w, m->coll);
  plait_wr_u8(w, m->dtype);
  plait_wr_u8(w, m->op);
  plait_wr_u8(w, m->ndim);
  plait_wr_i32(w, m->device);
  plait_wr_i32(w, m->root);
  plait_wr_f64(w, m->prescale);
  plait_wr_f64(w, m->postscale);
  for (int i = 0; i < m->ndim; i++) plait_wr_i64(w, m->shape[i]);
  plait_wr_u32(w, m->group_size);
  plait_wr_str(w, m->group ? m->group : "");
  plait_wr_u32(w, m->nsplits);
  for (uint32_t i = 0; i < m->nsplits; i++) plait_wr_i64(w, m->splits[i]);
}

static char *rd_strdup(plait_reader_t *r, size_t max) {
  size_t n;
  const uint8_t *p = plait_rd_blob(r, &n);
  if (!p || n > max || memchr(p, 0, n)) {
    r->bad = 1;
    return NULL;
  }
  char *s = malloc(n + 1);
  if (!s) {
    r->bad = 1;
    return NULL;
  }
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

void plait_meta_decode(plait_reader_t *r, plait_meta_t *m) {
  memset(m, 0, sizeof *m);
  m->coll = plait_rd_u8(r);
  m->dtype = plait_rd_u8(r);
  m->op = plait_rd_u8(r);
  m->ndim = plait_rd_u8(r);
  m->device = plait_rd_i32(r);
  m->root = plait_rd_i32(r);
  m->prescale = plait_rd_f64(r);
  m->postscale = plait_rd_f64(r);
  if (m->coll < 1 || m->coll > PLAIT_COLL_MAX_ || m->dtype >= PLAIT_DTYPE_COUNT_ ||
      m->op >= PLAIT_OP_COUNT_ || m->ndim > PLAIT_MAX_DIMS) {
    r->bad = 1;
    return;
  }
  for (int i = 0; i < m->ndim; i++)
    if ((m->shape[i] = plait_rd_i64(r)) < 0) r->bad = 1;
  m->group_size = plait_rd_u32(r);
  char *g = rd_strdup(r, PLAIT_MAX_NAME);
  if (g && *g)
    m->group = g;
  else
    free(g);
  m->nsplits = plait_rd_u32(r);
  if (r->bad || m->nsplits > 65536 || m->nsplits * 8u > r->len - r->pos) {
    r->bad = 1;
    m->nsplits = 0;
    return;
  }
  if (m->nsplits && !(m->splits = malloc(sizeof(int64_t) * m->nsplits))) {
    r->bad = 1;
    m->nsplits = 0;
    return;
  }
  for (uint32_t i = 0; i < m->nsplits; i++)
    if ((m->splits[i] = plait_rd_i64(r)) < 0) r->bad = 1;
}

plait_result_t plait_requests_encode(plait_writer_t *w, const plait_request_list_t *l) {
  plait_wr_begin(w, PLAIT_MSG_REQUESTS);
  plait_wr_u32(w, l->flags);
  plait_wr_u64(w, l->acked);
  plait_wr_u32(w, l->n);
  for (uint32_t i = 0; i < l->n; i++) {
    const plait_request_t *q = &l->r[i];
    plait_wr_i32(w, q->cache_id);
    if (q->cache_id < 0) {
      plait_wr_str(w, q->name);
      plait_meta_encode(w, &q->meta);
    }
  }
  return plait_wr_end(w);
}

void plait_requests_free(plait_request_list_t *l) {
  for (uint32_t i = 0; l->r && i < l->n; i++) {
    free(l->r[i].name);
    plait_meta_free(&l->r[i].meta);
  }
  free(l->r);
  memset(l, 0, sizeof *l);
}

plait_result_t plait_requests_decode(const uint8_t *p, size_t n, plait_request_list_t *l) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  memset(l, 0, sizeof *l);
  l->flags = plait_rd_u32(&r);
  l->acked = plait_rd_u64(&r);
  uint32_t count = plait_rd_u32(&r);
  if (count > MAX_ITEMS || count * 4u > r.len - r.pos) r.bad = 1; /* >= 4 bytes each */
  if (!r.bad && count && !(l->r = calloc(count, sizeof *l->r))) r.bad = 1;
  for (uint32_t i = 0; i < count && !r.bad; i++) {
    plait_request_t *q = &l->r[i];
    l->n = i + 1;
    q->cache_id = plait_rd_i32(&r);
    if (q->cache_id >= 0) continue;
    q->cache_id = -1;
    q->name = rd_strdup(&r, PLAIT_MAX_NAME);
    if (q->name && !*q->name) r.bad = 1;
    plait_meta_decode(&r, &q->meta);
  }
  plait_result_t rc = plait_rd_finish(&r, "requests message");
  if (rc) plait_requests_free(l);
  return rc;
}

static void encode_response(plait_writer_t *w, const plait_response_t *x) {
  plait_wr_u8(w, x->coll);
  plait_wr_u32(w, x->status);
  plait_wr_str(w, x->status ? x->message : "");
  plait_wr_u32(w, x->n);
  for (uint32_t i = 0; i < x->n; i++) {
    const plait_resp_entry_t *e = &x->e[i];
    uint8_t flags = (uint8_t)((e->cache_id >= 0 ? 1 : 0) | (e->assign_id >= 0 ? 2 : 0) |
                              (e->has_meta ? 4 : 0));
    plait_wr_u8(w, flags);
    if (e->cache_id >= 0)
      plait_wr_u32(w, (uint32_t)e->cache_id);
    else
      plait_wr_str(w, e->name);
    if (e->assign_id >= 0) plait_wr_u32(w, (uint32_t)e->assign_id);
    if (e->has_meta) plait_meta_encode(w, &e->meta);
  }
  plait_wr_u32(w, x->ndims);
  for (uint32_t i = 0; i < x->ndims; i++) plait_wr_i64(w, x->dims[i]);
  plait_wr_i32(w, x->join_rank);
}

plait_result_t plait_responses_encode(plait_writer_t *w, const plait_response_list_t *l) {
  plait_wr_begin(w, PLAIT_MSG_RESPONSES);
  plait_wr_u32(w, l->flags);
  plait_wr_i32(w, l->shutdown_rank);
  plait_wr_u32(w, l->n);
  for (uint32_t i = 0; i < l->n; i++) encode_response(w, &l->r[i]);
  return plait_wr_end(w);
}

void plait_response_free(plait_response_t *x) {
  free(x->message);
  for (uint32_t i = 0; x->e && i < x->n; i++) {
    free(x->e[i].name);
    plait_meta_free(&x->e[i].meta);
  }
  free(x->e);
  free(x->dims);
  memset(x, 0, sizeof *x);
}

void plait_responses_free(plait_response_list_t *l) {
  for (uint32_t i = 0; l->r && i < l->n; i++) plait_response_free(&l->r[i]);
  free(l->r);
  memset(l, 0, sizeof *l);
}

static void decode_entry(plait_reader_t *r, plait_resp_entry_t *e) {
  uint8_t flags = plait_rd_u8(r);
  if (flags & ~7u) r->bad = 1;
  e->cache_id = e->assign_id = -1;
  if (flags & 1) {
    uint32_t id = plait_rd_u32(r);
    if (id > INT32_MAX) r->bad = 1;
    e->cache_id = (int32_t)id;
  } else {
    e->name = rd_strdup(r, PLAIT_MAX_NAME);
  }
  if (flags & 2) {
    uint32_t id = plait_rd_u32(r);
    if (id > INT32_MAX) r->bad = 1;
    e->assign_id = (int32_t)id;
  }
  e->has_meta = (flags & 4) != 0;
  if (e->has_meta) plait_meta_decode(r, &e->meta);
}

static void decode_response(plait_reader_t *r, plait_response_t *x) {
  x->coll = plait_rd_u8(r);
  x->status = plait_rd_u32(r);
  x->message = rd_strdup(r, 8192);
  if (x->coll < 1 || x->coll > PLAIT_COLL_MAX_ || x->status >= PLAIT_RESULT_COUNT_) r->bad = 1;
  uint32_t n = plait_rd_u32(r);
  if (n > MAX_ITEMS || n * 5u > r->len - r->pos) r->bad = 1;
  if (!r->bad && n && !(x->e = calloc(n, sizeof *x->e))) r->bad = 1;
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    x->n = i + 1;
    decode_entry(r, &x->e[i]);
  }
  x->ndims = plait_rd_u32(r);
  if (r->bad || x->ndims > (1u << 20) || x->ndims * 8u > r->len - r->pos) {
    r->bad = 1;
    x->ndims = 0;
    return;
  }
  if (x->ndims && !(x->dims = malloc(sizeof(int64_t) * x->ndims))) {
    r->bad = 1;
    x->ndims = 0;
    return;
  }
  for (uint32_t i = 0; i < x->ndims; i++) x->dims[i] = plait_rd_i64(r);
  x->join_rank = plait_rd_i32(r);
}

plait_result_t plait_responses_decode(const uint8_t *p, size_t n, plait_response_list_t *l) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  memset(l, 0, sizeof *l);
  l->flags = plait_rd_u32(&r);
  l->shutdown_rank = plait_rd_i32(&r);
  uint32_t count = plait_rd_u32(&r);
  if (count > MAX_ITEMS || count * 17u > r.len - r.pos) r.bad = 1; /* >= 17 bytes each */
  if (!r.bad && count && !(l->r = calloc(count, sizeof *l->r))) r.bad = 1;
  for (uint32_t i = 0; i < count && !r.bad; i++) {
    l->n = i + 1;
    decode_response(&r, &l->r[i]);
  }
  plait_result_t rc = plait_rd_finish(&r, "responses message");
  if (rc) plait_responses_free(l);
  return rc;
}
