/*
 * Internal: the two messages of steady-state negotiation.
 *
 * REQUESTS (rank > 0 -> rank 0): the operations that became ready on that
 * rank since its last message: a full request (name + metadata) for new ones,
 * a response-cache id for ones seen before (4 bytes instead of ~100). Flags
 * carry "this rank is shutting down" and heartbeats.
 *
 * RESPONSES (rank 0 -> every rank): the responses every rank executes, in
 * order. Each names its tensors (or cache ids), may assign cache ids, and
 * carries what the kind needs (allgather first dimensions, the alltoall split
 * matrix, the last rank to join), or an error every rank reports.
 */
#ifndef PLAIT_NEGOTIATION_MSGS_H
#define PLAIT_NEGOTIATION_MSGS_H

#include "engine/submit/entry.h"
#include "control/wire.h"

#define PLAIT_REQ_SHUTDOWN 0x1u  /* the sender is shutting down */
#define PLAIT_REQ_FAILED 0x2u    /* the sender's transport failed: who is still here? */
#define PLAIT_FAIL_TEXT_MAX 2048 /* bytes of a failure report's message */
#define PLAIT_RESP_SHUTDOWN 0x1u /* coordination ends for everyone after this list */
#define PLAIT_RESP_TUNING 0x2u   /* carries the settings this list and the next run with */
#define PLAIT_RESP_EPOCH 0x4u    /* opens a cached epoch on this list's burst (epoch.h) */

typedef struct plait_request {
  char *name;       /* NULL when by cache id */
  int32_t cache_id; /* -1 for a full request */
  plait_meta_t meta;
} plait_request_t;

typedef struct plait_request_list {
  uint32_t flags;
  uint32_t n;
  plait_request_t *r;
  uint64_t acked; /* response lists the sender had run when it sent this */
} plait_request_list_t;

typedef struct plait_resp_entry {
  char *name;        /* resolved (from the cache when sent by id) */
  int32_t cache_id;  /* the id it was sent by, -1 when by name */
  int32_t assign_id; /* cache id every rank records for it, -1 none */
  int has_meta;      /* meta valid (for ranks that joined) */
  plait_meta_t meta;
  int name_borrowed; /* name is the response cache's (a peer resolving an id): not freed */
} plait_resp_entry_t;

typedef struct plait_response {
  uint8_t coll;       /* plait_coll_t */
  uint32_t status;    /* plait_result_t */
  char *message;      /* for a failed response */
  uint32_t n;
  plait_resp_entry_t *e;
  int64_t *dims;      /* allgather: first dimension of each rank; alltoall: size x size splits */
  uint32_t ndims;
  int32_t join_rank;  /* join: the last rank to join */
  int32_t pset;       /* the process set that runs it (0: every rank); others skip it */
} plait_response_t;

/* Rank 0's autotuned settings (engine/tune/autotune.h), with PLAIT_RESP_TUNING:
 * every rank runs this list and the ones after it with them, until a list
 * carries others; active 0 returns every rank to its own settings. Encoded
 * after the responses (wire version 3). */
typedef struct plait_list_tuning {
  uint8_t active; /* 0 off, 1 exploring, 2 settled */
  uint64_t threshold, max_tensor;
  double cycle_ms;
} plait_list_tuning_t;

typedef struct plait_response_list {
  uint32_t flags;
  int32_t shutdown_rank; /* with PLAIT_RESP_SHUTDOWN: who asked first */
  uint32_t n;
  plait_response_t *r;
  plait_list_tuning_t tuning; /* with PLAIT_RESP_TUNING */
} plait_response_list_t;

void plait_meta_encode(plait_writer_t *w, const plait_meta_t *m);
/* Decodes into m (owned parts allocated); sets r->bad on malformed input. */
void plait_meta_decode(plait_reader_t *r, plait_meta_t *m);

plait_result_t plait_requests_encode(plait_writer_t *w, const plait_request_list_t *l);
plait_result_t plait_requests_decode(const uint8_t *p, size_t n, plait_request_list_t *l);
void plait_requests_free(plait_request_list_t *l);
/* A failure report: l with PLAIT_REQ_FAILED in its flags, then the error the
 * sender's collective failed with and its message (at most
 * PLAIT_FAIL_TEXT_MAX bytes), after everything else. plait_requests_encode
 * sends a report with code 0 and no message. */
plait_result_t plait_requests_encode_failure(plait_writer_t *w, const plait_request_list_t *l,
                                             uint32_t code, const char *text);
/* plait_requests_decode, and for a failure report its error and message
 * (*text: free it); *code 0 and *text NULL for any other list. */
plait_result_t plait_requests_decode_failure(const uint8_t *p, size_t n, plait_request_list_t *l,
                                             uint32_t *code, char **text);

plait_result_t plait_responses_encode(plait_writer_t *w, const plait_response_list_t *l);
/* Names of entries sent by cache id stay NULL: the caller resolves them. */
plait_result_t plait_responses_decode(const uint8_t *p, size_t n, plait_response_list_t *l);
void plait_response_free(plait_response_t *r);
void plait_responses_free(plait_response_list_t *l);

/* Decodes a whole frame (header and payload, len bytes) of any type: the
 * negotiation payloads here, every other type by plait_msg_decode_frame. The
 * entry point for fuzzing; PLAIT_ERR_PROTOCOL on anything malformed. */
plait_result_t plait_neg_decode_frame(const uint8_t *frame, size_t len);

#endif
