/* Control-plane frames: header codec, writer and bounds-checked reader. */
#include "control/wire.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

plait_result_t plait_wire_decode_header(const uint8_t *b, uint32_t max_payload,
                                        plait_frame_header_t *out) {
  uint32_t magic = plait_load_le32(b);
  if (magic != PLAIT_WIRE_MAGIC)
    return plait_error(PLAIT_ERR_PROTOCOL, "not a plait frame (magic 0x%08x)", magic);
  uint16_t version = (uint16_t)(b[4] | b[5] << 8);
  uint16_t type = (uint16_t)(b[6] | b[7] << 8);
  uint32_t length = plait_load_le32(b + 8);
  if (version != PLAIT_WIRE_VERSION)
    return plait_error(PLAIT_ERR_PROTOCOL, "protocol version %u, this library speaks %u",
                       version, PLAIT_WIRE_VERSION);
  if (type < 1 || type > PLAIT_MSG_TYPE_MAX_)
    return plait_error(PLAIT_ERR_PROTOCOL, "unknown message type %u", type);
  if (length > max_payload)
    return plait_error(PLAIT_ERR_PROTOCOL, "frame of %u bytes is over the limit of %u bytes",
                       length, max_payload);
  out->version = version;
  out->type = type;
  out->length = length;
  return PLAIT_SUCCESS;
}

static void wr_reserve(plait_writer_t *w, size_t more) {
  if (w->oom) return;
  if (w->len + more <= w->cap) return;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < w->len + more) cap *= 2;
  uint8_t *p = realloc(w->data, cap);
  if (!p) {
    w->oom = 1;
    return;
  }
  w->data = p;
  w->cap = cap;
}

void plait_wr_raw(plait_writer_t *w, const void *p, size_t n) {
  wr_reserve(w, n);
  if (w->oom) return;
  if (n) memcpy(w->data + w->len, p, n);
  w->len += n;
}

void plait_wr_begin(plait_writer_t *w, plait_msg_type_t type) {
  w->len = 0;
  w->oom = 0;
  w->unfit = NULL;
  uint8_t h[PLAIT_WIRE_HEADER_SIZE];
  plait_store_le32(h, PLAIT_WIRE_MAGIC);
  h[4] = PLAIT_WIRE_VERSION & 0xff;
  h[5] = PLAIT_WIRE_VERSION >> 8;
  h[6] = (uint8_t)type;
  h[7] = (uint8_t)((unsigned)type >> 8);
  plait_store_le32(h + 8, 0);
  plait_wr_raw(w, h, sizeof h);
}

void plait_wr_u8(plait_writer_t *w, uint8_t v) { plait_wr_raw(w, &v, 1); }
void plait_wr_u32(plait_writer_t *w, uint32_t v) {
  uint8_t b[4];
  plait_store_le32(b, v);
  plait_wr_raw(w, b, 4);
}
void plait_wr_u64(plait_writer_t *w, uint64_t v) {
  plait_wr_u32(w, (uint32_t)v);
  plait_wr_u32(w, (uint32_t)(v >> 32));
}
void plait_wr_i32(plait_writer_t *w, int32_t v) { plait_wr_u32(w, (uint32_t)v); }
void plait_wr_i64(plait_writer_t *w, int64_t v) { plait_wr_u64(w, (uint64_t)v); }
void plait_wr_f64(plait_writer_t *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  plait_wr_u64(w, bits);
}
void plait_wr_fits(plait_writer_t *w, int ok, const char *what) {
  if (!ok && !w->unfit) w->unfit = what;
}
void plait_wr_blob(plait_writer_t *w, const void *p, size_t n) {
  if (n > UINT32_MAX) {
    plait_wr_fits(w, 0, "a string or blob of 4 GiB or more (its length is a u32)");
    return;
  }
  plait_wr_u32(w, (uint32_t)n);
  plait_wr_raw(w, p, n);
}
void plait_wr_str(plait_writer_t *w, const char *s) { plait_wr_blob(w, s, s ? strlen(s) : 0); }

plait_result_t plait_wr_end(plait_writer_t *w) {
  if (w->oom) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory building a control message");
  if (w->unfit)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "control message not sent: %s does not fit "
                       "its wire field", w->unfit);
  size_t payload = w->len - PLAIT_WIRE_HEADER_SIZE;
  if (payload > PLAIT_WIRE_MAX_PAYLOAD)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                       "control message of %zu bytes is over the limit of %u bytes", payload,
                       PLAIT_WIRE_MAX_PAYLOAD);
  plait_store_le32(w->data + 8, (uint32_t)payload);
  return PLAIT_SUCCESS;
}

void plait_wr_free(plait_writer_t *w) {
  free(w->data);
  memset(w, 0, sizeof *w);
}

void plait_rd_init(plait_reader_t *r, const void *data, size_t len) {
  r->data = data;
  r->len = data ? len : 0;
  r->pos = 0;
  r->bad = 0;
}

/* Returns a pointer to n readable bytes, or NULL (and marks r bad). */
static const uint8_t *rd_take(plait_reader_t *r, size_t n) {
  if (r->bad || n > r->len - r->pos) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *p = r->data + r->pos;
  r->pos += n;
  return p;
}

uint8_t plait_rd_u8(plait_reader_t *r) {
  const uint8_t *p = rd_take(r, 1);
  return p ? p[0] : 0;
}
uint32_t plait_rd_u32(plait_reader_t *r) {
  const uint8_t *p = rd_take(r, 4);
  return p ? plait_load_le32(p) : 0;
}
uint64_t plait_rd_u64(plait_reader_t *r) {
  uint64_t lo = plait_rd_u32(r);
  uint64_t hi = plait_rd_u32(r);
  return lo | hi << 32;
}
int32_t plait_rd_i32(plait_reader_t *r) { return (int32_t)plait_rd_u32(r); }
int64_t plait_rd_i64(plait_reader_t *r) { return (int64_t)plait_rd_u64(r); }
double plait_rd_f64(plait_reader_t *r) {
  uint64_t bits = plait_rd_u64(r);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

void plait_rd_raw(plait_reader_t *r, void *out, size_t n) {
  const uint8_t *p = rd_take(r, n);
  if (p)
    memcpy(out, p, n);
  else if (n)
    memset(out, 0, n);
}

const uint8_t *plait_rd_blob(plait_reader_t *r, size_t *n) {
  uint32_t len = plait_rd_u32(r);
  const uint8_t *p = rd_take(r, len);
  *n = p ? len : 0;
  return p;
}

/* A string blob of at most max bytes and no NUL, or NULL (r marked bad). */
static const uint8_t *rd_text(plait_reader_t *r, size_t max, size_t *n) {
  const uint8_t *p = plait_rd_blob(r, n);
  if (p && (*n > max || memchr(p, 0, *n))) {
    r->bad = 1;
    return NULL;
  }
  return p;
}

void plait_rd_str(plait_reader_t *r, char *out, size_t cap) {
  size_t n;
  const uint8_t *p = cap ? rd_text(r, cap - 1, &n) : NULL;
  if (cap) out[0] = '\0';
  if (!p) return;
  memcpy(out, p, n);
  out[n] = '\0';
}

char *plait_rd_strdup(plait_reader_t *r, size_t max) {
  size_t n;
  const uint8_t *p = rd_text(r, max, &n);
  char *s = p ? malloc(n + 1) : NULL;
  if (!s) {
    r->bad = 1;
    return NULL;
  }
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

plait_result_t plait_rd_finish(plait_reader_t *r, const char *what) {
  if (r->bad) return plait_error(PLAIT_ERR_PROTOCOL, "malformed %s: truncated or invalid field", what);
  if (r->pos != r->len)
    return plait_error(PLAIT_ERR_PROTOCOL, "malformed %s: %zu unexpected trailing bytes", what,
                       r->len - r->pos);
  return PLAIT_SUCCESS;
}
