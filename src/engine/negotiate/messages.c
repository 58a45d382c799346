/* Encoders and bounds-checked decoders of REQUESTS and RESPONSES. */
#include "engine/negotiate/messages.h"

#include <stdlib.h>
#include <string.h>

#include "control/messages.h"
#include "util/error.h"

#define MAX_ITEMS (1u << 24) /* no list is longer; a bigger count is malformed */
#define MAX_SPLITS 65536u   /* alltoall splits a decoder accepts (one per rank) */
#define MAX_DIMS_LIST (1u << 20) /* a response's dims (alltoall: size x size) */
#define MAX_MESSAGE 8192u   /* a failed response's message, in bytes */

/* The encoders refuse what the decoders would refuse as malformed, so a
 * value out of range fails where it is made, naming it, not on rank 0 as a
 * protocol error blamed on the sender. */
static void wr_name(plait_writer_t *w, const char *name, const char *what) {
  plait_wr_fits(w, !name || strlen(name) <= PLAIT_MAX_NAME, what);
  plait_wr_str(w, name);
}

/* A set of cache ids, as a list of u32 or as a bit-vector, whichever is
 * smaller: u8 form (0 list, 1 bits), then u32 count + ids, or u32 nbits +
 * ceil(nbits / 8) bytes. ids must be ascending for the bit form to keep order. */
static void wr_ids(plait_writer_t *w, const int32_t *ids, uint32_t n) {
  plait_wr_fits(w, n <= MAX_ITEMS, "a set of more than 2^24 cache ids");
  for (uint32_t i = 0; i < n; i++)
    plait_wr_fits(w, ids[i] >= 0, "a negative cache id");
  uint32_t nbits = n ? (uint32_t)ids[n - 1] + 1 : 0;
  int ascending = 1;
  for (uint32_t i = 1; i < n && ascending; i++) ascending = ids[i] > ids[i - 1];
  if (ascending && (nbits + 7) / 8 < 4u * n) {
    plait_wr_u8(w, 1);
    plait_wr_u32(w, nbits);
    uint8_t byte = 0;
    for (uint32_t b = 0, i = 0; b < nbits; b++) {
      if (i < n && (uint32_t)ids[i] == b) byte |= (uint8_t)(1u << (b % 8)), i++;
      if (b % 8 == 7 || b == nbits - 1) plait_wr_u8(w, byte), byte = 0;
    }
    return;
  }
  plait_wr_u8(w, 0);
  plait_wr_u32(w, n);
  for (uint32_t i = 0; i < n; i++) plait_wr_u32(w, (uint32_t)ids[i]);
}

/* Reads an id set into a malloc'd ascending (bits) or as-sent (list) array. */
static int32_t *rd_ids(plait_reader_t *r, uint32_t *n) {
  *n = 0;
  uint8_t form = plait_rd_u8(r);
  uint32_t count = plait_rd_u32(r);
  if (r->bad || form > 1 || count > MAX_ITEMS ||
      (form == 0 ? count * 4u : (count + 7) / 8) > r->len - r->pos) {
    r->bad = 1;
    return NULL;
  }
  int32_t *ids = malloc(sizeof *ids * (count ? count : 1));
  if (!ids) {
    r->bad = 1;
    return NULL;
  }
  if (form == 0) {
    for (uint32_t i = 0; i < count; i++) {
      uint32_t id = plait_rd_u32(r);
      if (id > INT32_MAX) r->bad = 1;
      ids[(*n)++] = (int32_t)id;
    }
  } else {
    for (uint32_t b = 0; b < count; b += 8) {
      uint8_t byte = plait_rd_u8(r);
      for (uint32_t k = 0; k < 8 && b + k < count; k++)
        if (byte & (1u << k)) ids[(*n)++] = (int32_t)(b + k);
      if (count - b < 8 && (byte >> (count - b))) r->bad = 1; /* bits past the end */
    }
  }
  return ids;
}

void plait_meta_encode(plait_writer_t *w, const plait_meta_t *m) {
  plait_wr_fits(w, m->ndim <= PLAIT_MAX_DIMS, "a tensor's ndim (at most PLAIT_MAX_DIMS)");
  plait_wr_fits(w, m->nsplits <= MAX_SPLITS, "alltoall splits for more than 65536 ranks");
  for (int i = 0; i < m->ndim && i < PLAIT_MAX_DIMS; i++)
    plait_wr_fits(w, m->shape[i] >= 0, "a negative dimension");
  for (uint32_t i = 0; i < m->nsplits; i++)
    plait_wr_fits(w, m->splits[i] >= 0, "a negative alltoall split");
  plait_wr_u8(w, m->coll);
  plait_wr_u8(w, m->dtype);
  plait_wr_u8(w, m->op);
  plait_wr_u8(w, m->ndim);
  plait_wr_i32(w, m->device);
  plait_wr_i32(w, m->root);
  plait_wr_i32(w, m->pset);
  plait_wr_f64(w, m->prescale);
  plait_wr_f64(w, m->postscale);
  for (int i = 0; i < m->ndim; i++) plait_wr_i64(w, m->shape[i]);
  plait_wr_u32(w, m->group_size);
  wr_name(w, m->group ? m->group : "", "a group name longer than PLAIT_MAX_NAME bytes");
  plait_wr_u32(w, m->nsplits);
  for (uint32_t i = 0; i < m->nsplits; i++) plait_wr_i64(w, m->splits[i]);
}

void plait_meta_decode(plait_reader_t *r, plait_meta_t *m) {
  memset(m, 0, sizeof *m);
  m->coll = plait_rd_u8(r);
  m->dtype = plait_rd_u8(r);
  m->op = plait_rd_u8(r);
  m->ndim = plait_rd_u8(r);
  m->device = plait_rd_i32(r);
  m->root = plait_rd_i32(r);
  m->pset = plait_rd_i32(r);
  if (m->pset < 0) r->bad = 1;
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
  char *g = plait_rd_strdup(r, PLAIT_MAX_NAME);
  if (g && *g)
    m->group = g;
  else
    free(g);
  m->nsplits = plait_rd_u32(r);
  if (r->bad || m->nsplits > MAX_SPLITS || m->nsplits * 8u > r->len - r->pos) {
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

static plait_result_t encode_requests(plait_writer_t *w, const plait_request_list_t *l,
                                      uint32_t code, const char *text);

plait_result_t plait_requests_encode(plait_writer_t *w, const plait_request_list_t *l) {
  return encode_requests(w, l, 0, "");
}

plait_result_t plait_requests_encode_failure(plait_writer_t *w, const plait_request_list_t *l,
                                             uint32_t code, const char *text) {
  return encode_requests(w, l, code, text);
}

static plait_result_t encode_requests(plait_writer_t *w, const plait_request_list_t *l,
                                      uint32_t code, const char *text) {
  plait_wr_begin(w, PLAIT_MSG_REQUESTS);
  plait_wr_u32(w, l->flags);
  plait_wr_u64(w, l->acked);
  uint32_t nfull = 0, ncached = 0;
  for (uint32_t i = 0; i < l->n; i++) l->r[i].cache_id < 0 ? nfull++ : ncached++;
  plait_wr_fits(w, nfull <= MAX_ITEMS, "more than 2^24 requests in one message");
  plait_wr_u32(w, nfull);
  int32_t *ids = malloc(sizeof *ids * (ncached ? ncached : 1));
  if (!ids) w->oom = 1;
  uint32_t k = 0;
  for (uint32_t i = 0; i < l->n; i++) {
    const plait_request_t *q = &l->r[i];
    if (q->cache_id >= 0) {
      if (ids) ids[k++] = q->cache_id;
      continue;
    }
    wr_name(w, q->name, "a tensor name longer than PLAIT_MAX_NAME bytes");
    plait_meta_encode(w, &q->meta);
  }
  if (ids) { /* sorted, the set travels as a bit-vector when that is smaller */
    for (uint32_t i = 1; i < k; i++)
      for (uint32_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
        int32_t t = ids[j];
        ids[j] = ids[j - 1];
        ids[j - 1] = t;
      }
    wr_ids(w, ids, k);
  }
  free(ids);
  if (l->flags & PLAIT_REQ_FAILED) { /* the failure's error and message */
    size_t len = text ? strlen(text) : 0;
    plait_wr_u32(w, code);
    plait_wr_blob(w, text, len < PLAIT_FAIL_TEXT_MAX ? len : PLAIT_FAIL_TEXT_MAX);
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
  uint32_t code;
  char *text = NULL;
  plait_result_t rc = plait_requests_decode_failure(p, n, l, &code, &text);
  free(text);
  return rc;
}

plait_result_t plait_requests_decode_failure(const uint8_t *p, size_t n, plait_request_list_t *l,
                                             uint32_t *code, char **text) {
  *code = 0;
  *text = NULL;
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  memset(l, 0, sizeof *l);
  l->flags = plait_rd_u32(&r);
  l->acked = plait_rd_u64(&r);
  uint32_t nfull = plait_rd_u32(&r);
  if (nfull > MAX_ITEMS || nfull * 30u > r.len - r.pos) r.bad = 1; /* >= 30 bytes each */
  if (!r.bad && nfull && !(l->r = calloc(nfull, sizeof *l->r))) r.bad = 1;
  for (uint32_t i = 0; i < nfull && !r.bad; i++) {
    plait_request_t *q = &l->r[i];
    l->n = i + 1;
    q->cache_id = -1;
    q->name = plait_rd_strdup(&r, PLAIT_MAX_NAME);
    if (q->name && !*q->name) r.bad = 1;
    plait_meta_decode(&r, &q->meta);
  }
  uint32_t ncached = 0;
  int32_t *ids = r.bad ? NULL : rd_ids(&r, &ncached);
  if (ids && ncached) {
    plait_request_t *all = realloc(l->r, sizeof *all * (nfull + ncached));
    if (!all) {
      r.bad = 1;
    } else {
      l->r = all;
      for (uint32_t i = 0; i < ncached; i++) {
        memset(&all[nfull + i], 0, sizeof all[0]);
        all[nfull + i].cache_id = ids[i];
      }
      l->n = nfull + ncached;
    }
  }
  free(ids);
  if (!r.bad && (l->flags & PLAIT_REQ_FAILED)) {
    *code = plait_rd_u32(&r);
    *text = plait_rd_strdup(&r, PLAIT_FAIL_TEXT_MAX);
  }
  plait_result_t rc = plait_rd_finish(&r, "requests message");
  if (rc) {
    plait_requests_free(l);
    free(*text);
    *text = NULL;
    *code = 0;
  }
  return rc;
}

static void encode_response(plait_writer_t *w, const plait_response_t *x) {
  plait_wr_u8(w, x->coll);
  plait_wr_u32(w, x->status);
  const char *msg = x->status && x->message ? x->message : "";
  size_t len = strlen(msg); /* a longer message is cut here, not refused by the decoder */
  plait_wr_blob(w, msg, len < MAX_MESSAGE ? len : MAX_MESSAGE);
  int all_cached = x->n > 0;
  for (uint32_t i = 0; i < x->n && all_cached; i++)
    all_cached = x->e[i].cache_id >= 0 && x->e[i].assign_id < 0 && !x->e[i].has_meta &&
                 (i == 0 || x->e[i].cache_id > x->e[i - 1].cache_id);
  plait_wr_u8(w, (uint8_t)all_cached);
  if (all_cached) { /* ascending ids: as a list or a bit-vector */
    int32_t *ids = malloc(sizeof *ids * x->n);
    if (!ids) {
      w->oom = 1;
    } else {
      for (uint32_t i = 0; i < x->n; i++) ids[i] = x->e[i].cache_id;
      wr_ids(w, ids, x->n);
      free(ids);
    }
  } else {
    plait_wr_fits(w, x->n <= MAX_ITEMS, "more than 2^24 entries in one response");
    plait_wr_u32(w, x->n);
  }
  for (uint32_t i = 0; i < x->n && !all_cached; i++) {
    const plait_resp_entry_t *e = &x->e[i];
    uint8_t flags = (uint8_t)((e->cache_id >= 0 ? 1 : 0) | (e->assign_id >= 0 ? 2 : 0) |
                              (e->has_meta ? 4 : 0));
    plait_wr_u8(w, flags);
    if (e->cache_id >= 0)
      plait_wr_u32(w, (uint32_t)e->cache_id);
    else
      wr_name(w, e->name, "a tensor name longer than PLAIT_MAX_NAME bytes");
    if (e->assign_id >= 0) plait_wr_u32(w, (uint32_t)e->assign_id);
    if (e->has_meta) plait_meta_encode(w, &e->meta);
  }
  plait_wr_fits(w, x->ndims <= MAX_DIMS_LIST,
                "a response's dimension list of more than 2^20 entries (alltoall's split "
                "matrix for more than 1024 ranks)");
  plait_wr_u32(w, x->ndims);
  for (uint32_t i = 0; i < x->ndims; i++) plait_wr_i64(w, x->dims[i]);
  plait_wr_i32(w, x->join_rank);
  plait_wr_i32(w, x->pset);
}

plait_result_t plait_responses_encode(plait_writer_t *w, const plait_response_list_t *l) {
  plait_wr_begin(w, PLAIT_MSG_RESPONSES);
  plait_wr_u32(w, l->flags);
  plait_wr_i32(w, l->shutdown_rank);
  plait_wr_u32(w, l->n);
  for (uint32_t i = 0; i < l->n; i++) encode_response(w, &l->r[i]);
  if (l->flags & PLAIT_RESP_TUNING) {
    plait_wr_u8(w, l->tuning.active);
    plait_wr_u64(w, l->tuning.threshold);
    plait_wr_u64(w, l->tuning.max_tensor);
    plait_wr_f64(w, l->tuning.cycle_ms);
  }
  return plait_wr_end(w);
}

void plait_response_free(plait_response_t *x) {
  free(x->message);
  for (uint32_t i = 0; x->e && i < x->n; i++) {
    if (!x->e[i].name_borrowed) free(x->e[i].name);
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
    e->name = plait_rd_strdup(r, PLAIT_MAX_NAME);
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
  x->message = plait_rd_strdup(r, MAX_MESSAGE);
  if (x->coll < 1 || x->coll > PLAIT_COLL_MAX_ || x->status >= PLAIT_RESULT_COUNT_) r->bad = 1;
  uint8_t all_cached = plait_rd_u8(r);
  if (all_cached > 1) r->bad = 1;
  if (all_cached && !r->bad) {
    uint32_t n = 0;
    int32_t *ids = rd_ids(r, &n);
    if (ids && n && !(x->e = calloc(n, sizeof *x->e))) r->bad = 1;
    for (uint32_t i = 0; ids && x->e && i < n; i++) {
      x->e[i].cache_id = ids[i];
      x->e[i].assign_id = -1;
    }
    if (x->e) x->n = n;
    free(ids);
  } else if (!r->bad) {
    uint32_t n = plait_rd_u32(r);
    if (n > MAX_ITEMS || n * 5u > r->len - r->pos) r->bad = 1;
    if (!r->bad && n && !(x->e = calloc(n, sizeof *x->e))) r->bad = 1;
    for (uint32_t i = 0; i < n && !r->bad; i++) {
      x->n = i + 1;
      decode_entry(r, &x->e[i]);
    }
  }
  x->ndims = plait_rd_u32(r);
  if (r->bad || x->ndims > MAX_DIMS_LIST || x->ndims * 8u > r->len - r->pos) {
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
  x->pset = plait_rd_i32(r);
  if (x->pset < 0) r->bad = 1;
}

plait_result_t plait_responses_decode(const uint8_t *p, size_t n, plait_response_list_t *l) {
  plait_reader_t r;
  plait_rd_init(&r, p, n);
  memset(l, 0, sizeof *l);
  l->flags = plait_rd_u32(&r);
  l->shutdown_rank = plait_rd_i32(&r);
  uint32_t count = plait_rd_u32(&r);
  if (count > MAX_ITEMS || count * 18u > r.len - r.pos) r.bad = 1; /* >= 18 bytes each */
  if (!r.bad && count && !(l->r = calloc(count, sizeof *l->r))) r.bad = 1;
  for (uint32_t i = 0; i < count && !r.bad; i++) {
    l->n = i + 1;
    decode_response(&r, &l->r[i]);
  }
  if (l->flags & ~(PLAIT_RESP_SHUTDOWN | PLAIT_RESP_TUNING | PLAIT_RESP_EPOCH)) r.bad = 1;
  if (!r.bad && (l->flags & PLAIT_RESP_TUNING)) {
    l->tuning.active = plait_rd_u8(&r);
    l->tuning.threshold = plait_rd_u64(&r);
    l->tuning.max_tensor = plait_rd_u64(&r);
    l->tuning.cycle_ms = plait_rd_f64(&r);
    if (l->tuning.active > 2 || !(l->tuning.cycle_ms > 0 && l->tuning.cycle_ms <= 10000))
      r.bad = 1;
  }
  plait_result_t rc = plait_rd_finish(&r, "responses message");
  if (rc) plait_responses_free(l);
  return rc;
}

plait_result_t plait_neg_decode_frame(const uint8_t *frame, size_t len) {
  plait_frame_header_t h;
  if (len < PLAIT_WIRE_HEADER_SIZE ||
      plait_wire_decode_header(frame, PLAIT_WIRE_MAX_PAYLOAD, &h) != PLAIT_SUCCESS ||
      h.length != len - PLAIT_WIRE_HEADER_SIZE ||
      (h.type != PLAIT_MSG_REQUESTS && h.type != PLAIT_MSG_RESPONSES))
    return plait_msg_decode_frame(frame, len); /* also says what is wrong with the header */
  const uint8_t *p = frame + PLAIT_WIRE_HEADER_SIZE;
  if (h.type == PLAIT_MSG_REQUESTS) {
    plait_request_list_t l;
    PLAIT_CHECK(plait_requests_decode(p, h.length, &l));
    plait_requests_free(&l);
    return PLAIT_SUCCESS;
  }
  plait_response_list_t l;
  PLAIT_CHECK(plait_responses_decode(p, h.length, &l));
  plait_responses_free(&l);
  return PLAIT_SUCCESS;
}
