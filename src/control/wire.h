/*
 * Internal: the control-plane wire format.
 *
 * A frame is a 12-byte header followed by a payload, all little-endian:
 *   u32 magic "PLT1" | u16 version | u16 type | u32 payload length
 * The payload length is at most PLAIT_WIRE_MAX_PAYLOAD. Payloads are read with
 * a cursor that checks every read against the end; a short or malformed
 * payload sets the cursor's error flag instead of reading out of bounds.
 */
#ifndef PLAIT_WIRE_H
#define PLAIT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"

#define PLAIT_WIRE_MAGIC 0x31544c50u /* "PLT1" as little-endian bytes */
#define PLAIT_WIRE_VERSION 4 /* 3: response lists carry autotuned settings; 4: failure reports their error and message */
#define PLAIT_WIRE_HEADER_SIZE 12
#define PLAIT_WIRE_MAX_PAYLOAD (64u << 20)
#define PLAIT_WIRE_NONCE_SIZE 32
#define PLAIT_WIRE_MAC_SIZE 32
#define PLAIT_WIRE_MAX_STRING 4096

typedef enum plait_msg_type {
  PLAIT_MSG_HELLO = 1,       /* rank 0 -> peer: server nonce */
  PLAIT_MSG_AUTH = 2,        /* peer -> rank 0: rank, size, nonce, MAC, host */
  PLAIT_MSG_WELCOME = 3,     /* rank 0 -> peer: rank 0's MAC */
  PLAIT_MSG_REJECT = 4,      /* rank 0 -> peer: why it was refused */
  PLAIT_MSG_TOPOLOGY = 5,    /* rank 0 -> peer: every rank's host */
  PLAIT_MSG_BOOT_DATA = 6,   /* peer -> rank 0: one bootstrap contribution */
  PLAIT_MSG_BOOT_RESULT = 7, /* rank 0 -> peer: the bootstrap result */
  PLAIT_MSG_ABORT = 8,       /* rank 0 -> peer: the job failed, and why */
  PLAIT_MSG_REQUESTS = 9,    /* peer -> rank 0: operations ready on the peer */
  PLAIT_MSG_RESPONSES = 10,  /* rank 0 -> peer: what every rank runs, in order */
  PLAIT_MSG_ALIVE = 11,      /* either way, empty: sent while the coordinator is away */
  /* elastic rendezvous, worker <-> plaitrun's driver (control/elastic_wire.h) */
  PLAIT_MSG_EL_JOIN = 12,    /* worker -> driver: place me in the next job */
  PLAIT_MSG_EL_ASSIGN = 13,  /* driver -> worker: your place (epoch, rank, ...) */
  PLAIT_MSG_EL_STOP = 14,    /* driver -> worker: no place, and why */
  PLAIT_MSG_EL_POLL = 15,    /* worker -> driver: host updates since my epoch? */
  PLAIT_MSG_EL_UPDATES = 16, /* driver -> worker: the answer to POLL */
  PLAIT_MSG_TREE = 17,       /* either way, connecting the control tree (control/tree.h) */
  PLAIT_MSG_RELAYED = 18,    /* up the control tree: other ranks' REQUESTS payloads */
  PLAIT_MSG_TYPE_MAX_ = 18
} plait_msg_type_t;

typedef struct plait_frame_header {
  uint16_t version;
  uint16_t type;
  uint32_t length;
} plait_frame_header_t;

/* Decodes a header from exactly PLAIT_WIRE_HEADER_SIZE bytes. Fails (with the
 * thread's last error set) on a wrong magic, version, unknown type or a
 * length over max_payload. */
plait_result_t plait_wire_decode_header(const uint8_t *bytes, uint32_t max_payload,
                                        plait_frame_header_t *out);

/* A growable output buffer; put_* never fail (an allocation failure sets
 * oom and later puts do nothing; a value its wire field cannot carry sets
 * unfit, and plait_wr_end then fails). */
typedef struct plait_writer {
  uint8_t *data;
  size_t len, cap;
  int oom;
  const char *unfit; /* the first value that does not fit its field (static text) */
} plait_writer_t;

/* Starts a frame of the given type (reserves the header). */
void plait_wr_begin(plait_writer_t *w, plait_msg_type_t type);
void plait_wr_u8(plait_writer_t *w, uint8_t v);
void plait_wr_u32(plait_writer_t *w, uint32_t v);
void plait_wr_u64(plait_writer_t *w, uint64_t v);
void plait_wr_i32(plait_writer_t *w, int32_t v);
void plait_wr_i64(plait_writer_t *w, int64_t v);
void plait_wr_f64(plait_writer_t *w, double v);
void plait_wr_raw(plait_writer_t *w, const void *p, size_t n);
/* Records, unless ok, that `what` (static text naming the value and its
 * limit) does not fit the wire: the frame is then refused by plait_wr_end,
 * rather than sent cut short or wrapped for the receiver to misread. */
void plait_wr_fits(plait_writer_t *w, int ok, const char *what);
/* u32 length + bytes. */
void plait_wr_blob(plait_writer_t *w, const void *p, size_t n);
void plait_wr_str(plait_writer_t *w, const char *s);
/* Fills in the header's length. Returns PLAIT_ERR_NO_MEMORY after an
 * allocation failure, PLAIT_ERR_INVALID_ARGUMENT if the payload is too big
 * or a value did not fit its field (naming it). */
plait_result_t plait_wr_end(plait_writer_t *w);
void plait_wr_free(plait_writer_t *w);

/* A bounds-checked reader over one payload. */
typedef struct plait_reader {
  const uint8_t *data;
  size_t len, pos;
  int bad; /* set by the first read past the end or invalid field */
} plait_reader_t;

void plait_rd_init(plait_reader_t *r, const void *data, size_t len);
uint8_t plait_rd_u8(plait_reader_t *r);
uint32_t plait_rd_u32(plait_reader_t *r);
uint64_t plait_rd_u64(plait_reader_t *r);
int32_t plait_rd_i32(plait_reader_t *r);
int64_t plait_rd_i64(plait_reader_t *r);
double plait_rd_f64(plait_reader_t *r);
/* Copies n bytes into out (zeros on error). */
void plait_rd_raw(plait_reader_t *r, void *out, size_t n);
/* u32 length + bytes: returns a pointer into the payload (no copy) and the
 * length; NULL with *n = 0 on error. */
const uint8_t *plait_rd_blob(plait_reader_t *r, size_t *n);
/* u32 length + bytes into out (NUL-terminated, cap bytes including NUL);
 * strings longer than cap-1 or containing NUL are an error. */
void plait_rd_str(plait_reader_t *r, char *out, size_t cap);
/* u32 length + bytes into a new malloc'd string of at most max bytes (no NUL
 * inside); NULL and r marked bad on error or when out of memory. */
char *plait_rd_strdup(plait_reader_t *r, size_t max);
/* Succeeds when nothing was bad and every byte was consumed; otherwise sets
 * the last error to "malformed <what>" and returns PLAIT_ERR_PROTOCOL. */
plait_result_t plait_rd_finish(plait_reader_t *r, const char *what);

/* Little-endian helpers. */
static inline void plait_store_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t plait_load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
