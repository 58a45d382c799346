/* The control-plane wire format: round trips, rejection of malformed input,
 * and a mutation fuzzer over every message decoder (run it under the ASan
 * build to catch any out-of-bounds read). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "control/elastic_wire.h"
#include "control/messages.h"
#include "engine/negotiate/messages.h"
#include "control/wire.h"

static plait_writer_t W;

static void fini(void) { plait_wr_free(&W); }
TestSuite(wire, .fini = fini);

Test(wire, header_round_trip) {
  plait_msg_hello_t h;
  for (int i = 0; i < PLAIT_WIRE_NONCE_SIZE; i++) h.nonce[i] = (uint8_t)i;
  cr_assert_eq(plait_msg_encode_hello(&W, &h), PLAIT_SUCCESS);
  cr_assert_eq(W.len, PLAIT_WIRE_HEADER_SIZE + PLAIT_WIRE_NONCE_SIZE);
  /* explicit little-endian: magic "PLT1", version 4, type 1, length 32 */
  cr_assert_eq(memcmp(W.data, "PLT1\x04\x00\x01\x00\x20\x00\x00\x00", 12), 0);
  plait_frame_header_t fh;
  cr_assert_eq(plait_wire_decode_header(W.data, PLAIT_WIRE_MAX_PAYLOAD, &fh), PLAIT_SUCCESS);
  cr_assert_eq(fh.type, PLAIT_MSG_HELLO);
  plait_msg_hello_t back;
  cr_assert_eq(plait_msg_decode_hello(W.data + 12, fh.length, &back), PLAIT_SUCCESS);
  cr_assert_eq(memcmp(back.nonce, h.nonce, sizeof h.nonce), 0);
}

Test(wire, header_rejects_bad_magic_version_type_length) {
  uint8_t h[12] = {'P', 'L', 'T', '1', 4, 0, 1, 0, 0, 0, 0, 0};
  plait_frame_header_t fh;
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_SUCCESS);
  h[0] = 'G';
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "not a plait frame"));
  h[0] = 'P';
  h[4] = 1; /* version 1 had no process sets in its negotiation messages */
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "version 1, this library speaks 4"));
  h[4] = 2; /* version 2's response lists could not carry autotuned settings */
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "version 2, this library speaks 4"));
  h[4] = 3; /* version 3's failure reports carried no error or message */
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "version 3, this library speaks 4"));
  h[4] = 4;
  h[6] = 99;
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "unknown message type 99"));
  h[6] = 1;
  h[8] = 101;
  cr_assert_eq(plait_wire_decode_header(h, 100, &fh), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "over the limit"));
}

Test(wire, auth_round_trip_and_truncation) {
  plait_msg_auth_t a;
  memset(&a, 0, sizeof a);
  a.rank = 3;
  a.size = 4;
  memset(a.nonce, 0xab, sizeof a.nonce);
  memset(a.mac, 0xcd, sizeof a.mac);
  strcpy(a.host, "node17");
  a.local_rank = -1;
  a.local_size = 2;
  cr_assert_eq(plait_msg_encode_auth(&W, &a), PLAIT_SUCCESS);
  plait_msg_auth_t b;
  size_t n = W.len - 12;
  cr_assert_eq(plait_msg_decode_auth(W.data + 12, n, &b), PLAIT_SUCCESS);
  cr_assert_eq(b.rank, 3);
  cr_assert_eq(b.size, 4);
  cr_assert_str_eq(b.host, "node17");
  cr_assert_eq(b.local_rank, -1);
  cr_assert_eq(b.local_size, 2);
  /* every proper prefix is malformed, and so is a trailing byte */
  for (size_t k = 0; k < n; k++) {
    cr_assert_eq(plait_msg_decode_auth(W.data + 12, k, &b), PLAIT_ERR_PROTOCOL, "prefix %zu", k);
    cr_assert(strstr(plait_last_error(), "malformed authentication message"));
  }
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, W.data + 12, n);
  longer[n] = 0;
  cr_assert_eq(plait_msg_decode_auth(longer, n + 1, &b), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "trailing"));
  free(longer);
}

Test(wire, string_length_lies_are_caught) {
  /* a reject whose string claims 4 GB */
  uint8_t p[8] = {0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd'};
  plait_msg_text_t t;
  cr_assert_eq(plait_msg_decode_text(p, sizeof p, 0, &t), PLAIT_ERR_PROTOCOL);
  /* a string with an embedded NUL */
  uint8_t q[8] = {4, 0, 0, 0, 'a', 0, 'c', 'd'};
  cr_assert_eq(plait_msg_decode_text(q, sizeof q, 0, &t), PLAIT_ERR_PROTOCOL);
  uint8_t ok[8] = {4, 0, 0, 0, 'a', 'b', 'c', 'd'};
  cr_assert_eq(plait_msg_decode_text(ok, sizeof ok, 0, &t), PLAIT_SUCCESS);
  cr_assert_str_eq(t.text, "abcd");
}

Test(wire, topology_and_boot_round_trip) {
  char hosts[3][PLAIT_HOST_MAX] = {"a", "b", "a"};
  int32_t lr[3] = {0, 0, 1}, ls[3] = {2, 1, 2};
  plait_msg_topology_t m = {3, hosts, lr, ls};
  cr_assert_eq(plait_msg_encode_topology(&W, &m), PLAIT_SUCCESS);
  cr_assert_eq(plait_msg_decode_frame(W.data, W.len), PLAIT_SUCCESS);
  char h2[3][PLAIT_HOST_MAX];
  int32_t lr2[3], ls2[3];
  plait_msg_topology_t back = {3, h2, lr2, ls2};
  cr_assert_eq(plait_msg_decode_topology(W.data + 12, W.len - 12, &back), PLAIT_SUCCESS);
  cr_assert_str_eq(h2[1], "b");
  cr_assert_eq(lr2[2], 1);
  plait_msg_topology_t wrong = {4, h2, lr2, ls2}; /* expecting another job size */
  cr_assert_eq(plait_msg_decode_topology(W.data + 12, W.len - 12, &wrong), PLAIT_ERR_PROTOCOL);

  uint8_t blob[5] = {1, 2, 3, 4, 5};
  plait_msg_boot_data_t d = {7, 1, 0, 5, blob, 5};
  cr_assert_eq(plait_msg_encode_boot_data(&W, &d), PLAIT_SUCCESS);
  plait_msg_boot_data_t d2;
  cr_assert_eq(plait_msg_decode_boot_data(W.data + 12, W.len - 12, &d2), PLAIT_SUCCESS);
  cr_assert_eq(d2.seq, 7);
  cr_assert_eq(d2.bytes, 5);
  cr_assert_eq(d2.data_len, 5);
  cr_assert_eq(memcmp(d2.data, blob, 5), 0);
}

Test(wire, frame_length_must_match) {
  plait_msg_welcome_t w;
  memset(w.mac, 1, sizeof w.mac);
  cr_assert_eq(plait_msg_encode_welcome(&W, &w), PLAIT_SUCCESS);
  cr_assert_eq(plait_msg_decode_frame(W.data, W.len), PLAIT_SUCCESS);
  cr_assert_eq(plait_msg_decode_frame(W.data, W.len - 1), PLAIT_ERR_PROTOCOL);
  cr_assert_eq(plait_msg_decode_frame(W.data, 5), PLAIT_ERR_PROTOCOL);
  cr_assert_eq(plait_msg_decode_frame(NULL, 0), PLAIT_ERR_PROTOCOL);
}

/* xorshift: deterministic, so a failure reproduces. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Valid frames of every type, to mutate. */
static size_t make_seeds(uint8_t **seeds, size_t *lens) {
  size_t k = 0;
  plait_writer_t w = {0};
  plait_msg_hello_t h = {{0}};
  plait_msg_auth_t a;
  memset(&a, 0, sizeof a);
  strcpy(a.host, "host-a");
  plait_msg_welcome_t wl = {{0}};
  char hosts[2][PLAIT_HOST_MAX] = {"x", "y"};
  int32_t lr[2] = {0, 1}, ls[2] = {2, 2};
  plait_msg_topology_t t = {2, hosts, lr, ls};
  uint8_t blob[16] = {0};
  plait_msg_boot_data_t d = {1, 1, 0, 16, blob, 16};
  plait_msg_boot_result_t r = {1, 0, "", blob, 16};
#define SEED(call)                                                             \
  do {                                                                         \
    cr_assert_eq((call), PLAIT_SUCCESS);                                       \
    seeds[k] = malloc(w.len);                                                  \
    memcpy(seeds[k], w.data, w.len);                                           \
    lens[k++] = w.len;                                                         \
  } while (0)
  SEED(plait_msg_encode_hello(&w, &h));
  SEED(plait_msg_encode_auth(&w, &a));
  SEED(plait_msg_encode_welcome(&w, &wl));
  SEED(plait_msg_encode_reject(&w, "no"));
  SEED(plait_msg_encode_abort(&w, 8, "rank 2 was lost"));
  SEED(plait_msg_encode_topology(&w, &t));
  SEED(plait_msg_encode_boot_data(&w, &d));
  SEED(plait_msg_encode_boot_result(&w, &r));
  /* the elastic rendezvous's (control/elastic_wire.h) */
  plait_el_join_t ej = {"h/0", 2, "127.0.0.1:5000", 2, {1, 3}};
  plait_el_assign_t ea = {3, 1, 4, 1, 2, 0, 2, "127.0.0.1:5000"};
  plait_el_updates_t eu = {9, PLAIT_EL_UPDATE_BITS};
  SEED(plait_el_encode_join(&w, &ej));
  SEED(plait_el_encode_assign(&w, &ea));
  SEED(plait_el_encode_stop(&w, "its host was removed"));
  SEED(plait_el_encode_poll(&w, 3));
  SEED(plait_el_encode_updates(&w, &eu));
  /* negotiation: a full request, a cached one, responses with every extra */
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = PLAIT_COLL_ALLTOALL;
  m.dtype = PLAIT_FLOAT32;
  m.ndim = 2;
  m.shape[0] = 4;
  m.shape[1] = 3;
  m.prescale = m.postscale = 1.0;
  int64_t splits[2] = {1, 3};
  m.splits = splits;
  m.nsplits = 2;
  m.group = "g";
  m.group_size = 2;
  plait_request_t rq[2] = {{"w", -1, m}, {NULL, 7, {0}}};
  plait_request_list_t rl = {0, 2, rq, 0};
  SEED(plait_requests_encode(&w, &rl));
  int64_t dims[4] = {1, 2, 3, 4};
  plait_resp_entry_t re[2] = {{"a", -1, 3, 1, m, 0}, {NULL, 5, -1, 0, {0}, 0}};
  plait_response_t rs[2] = {{PLAIT_COLL_ALLREDUCE, 0, NULL, 2, re, dims, 4, -1, 0},
                            {PLAIT_COLL_JOIN, PLAIT_ERR_MISMATCH, "bad", 0, NULL, NULL, 0, 1, 2}};
  plait_response_list_t rsl = {.flags = 1, .shutdown_rank = 2, .n = 2, .r = rs};
  SEED(plait_responses_encode(&w, &rsl));
#undef SEED
  plait_wr_free(&w);
  return k;
}

Test(wire, negotiation_round_trip) {
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = PLAIT_COLL_ALLREDUCE;
  m.dtype = PLAIT_BFLOAT16;
  m.op = PLAIT_OP_MAX;
  m.ndim = 3;
  m.shape[0] = 2, m.shape[1] = 0, m.shape[2] = 5;
  m.prescale = 0.5;
  m.postscale = 3.0;
  m.group = "layer1";
  m.group_size = 4;
  plait_request_t rq[2] = {{"layer1/w", -1, m}, {NULL, 42, {0}}};
  plait_request_list_t rl = {PLAIT_REQ_SHUTDOWN, 2, rq, 9}, back;
  cr_assert_eq(plait_requests_encode(&W, &rl), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_decode_frame(W.data, W.len), PLAIT_SUCCESS);
  cr_assert_eq(plait_requests_decode(W.data + 12, W.len - 12, &back), PLAIT_SUCCESS);
  cr_assert_eq(back.flags, PLAIT_REQ_SHUTDOWN);
  cr_assert_eq(back.n, 2);
  cr_assert_str_eq(back.r[0].name, "layer1/w");
  cr_assert_eq(back.r[0].meta.shape[2], 5);
  cr_assert_eq(back.r[0].meta.prescale, 0.5);
  cr_assert_str_eq(back.r[0].meta.group, "layer1");
  cr_assert_eq(back.r[1].cache_id, 42);
  cr_assert_null(back.r[1].name);
  plait_requests_free(&back);
  /* a cache id over INT32_MAX or a bad dtype is malformed */
  size_t n = W.len - 12;
  uint8_t *p = malloc(n);
  memcpy(p, W.data + 12, n);
  p[29] = 99; /* flags, acked, full count, name (4 + 8), coll: then the dtype byte */
  cr_assert_eq(plait_requests_decode(p, n, &back), PLAIT_ERR_PROTOCOL);
  free(p);
}

/* A failure report carries the sender's error and message (blame.h); any
 * other list has none, and a plain encode of a report sends code 0. */
Test(wire, failure_report_carries_code_and_message) {
  plait_writer_t w = {0};
  plait_request_list_t rl = {PLAIT_REQ_FAILED, 0, NULL, 7}, back;
  cr_assert_eq(plait_requests_encode_failure(&w, &rl, PLAIT_ERR_TRANSPORT,
                                             "receive failed: Truncation error"),
               PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_decode_frame(w.data, w.len), PLAIT_SUCCESS);
  uint32_t code = 0;
  char *text = NULL;
  cr_assert_eq(plait_requests_decode_failure(w.data + 12, w.len - 12, &back, &code, &text),
               PLAIT_SUCCESS);
  cr_assert_eq(back.flags, PLAIT_REQ_FAILED);
  cr_assert_eq(back.acked, 7);
  cr_assert_eq(code, PLAIT_ERR_TRANSPORT);
  cr_assert_str_eq(text, "receive failed: Truncation error");
  free(text);
  plait_requests_free(&back);
  /* the plain decoder reads it too; cut short, it is malformed */
  cr_assert_eq(plait_requests_decode(w.data + 12, w.len - 12, &back), PLAIT_SUCCESS);
  plait_requests_free(&back);
  cr_assert_eq(plait_requests_decode_failure(w.data + 12, w.len - 14, &back, &code, &text),
               PLAIT_ERR_PROTOCOL);
  cr_assert_null(text);
  plait_wr_free(&w);
  /* a list without the flag: no code, no message */
  plait_request_list_t plain = {0, 0, NULL, 1};
  cr_assert_eq(plait_requests_encode_failure(&w, &plain, PLAIT_ERR_TRANSPORT, "ignored"),
               PLAIT_SUCCESS);
  cr_assert_eq(plait_requests_decode_failure(w.data + 12, w.len - 12, &back, &code, &text),
               PLAIT_SUCCESS);
  cr_assert_eq(code, 0);
  cr_assert_null(text);
  plait_requests_free(&back);
  plait_wr_free(&w);
  /* a message over PLAIT_FAIL_TEXT_MAX bytes is cut to it */
  char *big = malloc(PLAIT_FAIL_TEXT_MAX + 100);
  memset(big, 'x', PLAIT_FAIL_TEXT_MAX + 99);
  big[PLAIT_FAIL_TEXT_MAX + 99] = '\0';
  cr_assert_eq(plait_requests_encode_failure(&w, &rl, PLAIT_ERR_TRANSPORT, big), PLAIT_SUCCESS);
  cr_assert_eq(plait_requests_decode_failure(w.data + 12, w.len - 12, &back, &code, &text),
               PLAIT_SUCCESS);
  cr_assert_eq(strlen(text), PLAIT_FAIL_TEXT_MAX);
  free(text);
  free(big);
  plait_requests_free(&back);
  plait_wr_free(&w);
}

/* Cached ids travel as a bit-vector when that is smaller, else as a list. */
Test(wire, cached_ids_as_bit_vector_or_list) {
  for (int dense = 0; dense < 2; dense++) {
    enum { K = 100 };
    plait_request_t rq[K];
    memset(rq, 0, sizeof rq);
    for (int i = 0; i < K; i++) rq[i].cache_id = dense ? K - 1 - i : i * 1000; /* any order */
    plait_request_list_t rl = {0, K, rq, 0}, back;
    cr_assert_eq(plait_requests_encode(&W, &rl), PLAIT_SUCCESS);
    size_t payload = W.len - 12;
    if (dense)
      cr_assert_lt(payload, 60, "100 dense ids took %zu bytes", payload); /* 13 bytes of bits */
    else
      cr_assert_gt(payload, 400, "sparse ids should go as a list");
    cr_assert_eq(plait_requests_decode(W.data + 12, payload, &back), PLAIT_SUCCESS);
    cr_assert_eq(back.n, K);
    for (int i = 0; i < K; i++)
      cr_assert_eq(back.r[i].cache_id, dense ? i : i * 1000, "id %d", i);
    plait_requests_free(&back);
  }
  /* a bit set past the declared length is malformed */
  plait_request_t one = {NULL, 2, {0}};
  plait_request_list_t rl = {0, 1, &one, 0}, back;
  cr_assert_eq(plait_requests_encode(&W, &rl), PLAIT_SUCCESS); /* list form: 1 id */
  uint8_t p[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0x0c};
  cr_assert_eq(plait_requests_decode(p, sizeof p, &back), PLAIT_ERR_PROTOCOL);
  p[21] = 0x04; /* bits 0..2 declared, bit 2 set: id 2 */
  cr_assert_eq(plait_requests_decode(p, sizeof p, &back), PLAIT_SUCCESS);
  cr_assert_eq(back.n, 1);
  cr_assert_eq(back.r[0].cache_id, 2);
  plait_requests_free(&back);
}

Test(wire, fuzz_every_decoder, .timeout = 120) {
  uint8_t *seeds[24];
  size_t lens[24];
  size_t nseeds = make_seeds(seeds, lens);
  for (size_t i = 0; i < nseeds; i++)
    cr_assert_eq(plait_neg_decode_frame(seeds[i], lens[i]), PLAIT_SUCCESS, "seed %zu", i);
  size_t cap = 512;
  uint8_t *buf = malloc(cap);
  long accepted = 0, rejected = 0;
  for (long iter = 0; iter < 300000; iter++) {
    size_t s = next() % nseeds;
    size_t len = lens[s];
    memcpy(buf, seeds[s], len);
    int edits = 1 + (int)(next() % 4);
    for (int e = 0; e < edits; e++) {
      switch (next() % 5) {
      case 0: buf[next() % len] ^= (uint8_t)(1u << (next() % 8)); break; /* bit flip */
      case 1: buf[next() % len] = (uint8_t)next(); break;                /* byte */
      case 2: if (len > 1) len -= 1 + next() % (len - 1); break;         /* truncate */
      case 3: while (len < cap && next() % 4) buf[len++] = (uint8_t)next(); break; /* extend */
      case 4: { /* rewrite a 32-bit field with an interesting value */
        static const uint32_t vals[] = {0, 1, 0x7fffffff, 0x80000000u, 0xffffffffu, 12, 255};
        if (len >= 4) plait_store_le32(buf + next() % (len - 3), vals[next() % 7]);
        break;
      }
      }
    }
    /* Keep the header's length honest half of the time so payload decoders run. */
    if (len >= 12 && next() % 2) plait_store_le32(buf + 8, (uint32_t)(len - 12));
    /* Copy to an exact-size allocation so ASan sees any overread. */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    plait_result_t rc = plait_neg_decode_frame(exact, len);
    free(exact);
    cr_assert(rc == PLAIT_SUCCESS || rc == PLAIT_ERR_PROTOCOL || rc == PLAIT_ERR_NO_MEMORY,
              "iteration %ld: unexpected %d", iter, rc);
    if (rc == PLAIT_SUCCESS) accepted++; else rejected++;
  }
  cr_log_info("fuzz: %ld accepted, %ld rejected", accepted, rejected);
  cr_assert(rejected > 0 && accepted > 0);
  free(buf);
  for (size_t i = 0; i < nseeds; i++) free(seeds[i]);
}

/* The control plane decodes its own messages; negotiation payloads are the
 * engine's (arrows point down: control never includes the engine). */
Test(wire, negotiation_frames_are_decoded_by_the_engine) {
  plait_request_t one = {NULL, 2, {0}};
  plait_request_list_t rl = {0, 1, &one, 0};
  cr_assert_eq(plait_requests_encode(&W, &rl), PLAIT_SUCCESS);
  cr_assert_eq(plait_msg_decode_frame(W.data, W.len), PLAIT_ERR_PROTOCOL);
  cr_assert(strstr(plait_last_error(), "plait_neg_decode_frame"), "%s", plait_last_error());
  cr_assert_eq(plait_neg_decode_frame(W.data, W.len), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_neg_decode_frame(W.data, W.len - 1), PLAIT_ERR_PROTOCOL);
  plait_msg_welcome_t w;
  memset(w.mac, 1, sizeof w.mac);
  cr_assert_eq(plait_msg_encode_welcome(&W, &w), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_decode_frame(W.data, W.len), PLAIT_SUCCESS, "control types too");
}

/* Values that do not fit their wire field are refused by the encoder,
 * naming the value (issue 16), instead of going out for the decoder to
 * refuse as malformed (or, for a blob length, to be cut short). */
static void expect_unfit(plait_result_t rc, const char *words) {
  cr_assert_eq(rc, PLAIT_ERR_INVALID_ARGUMENT, "got %s: %s", plait_result_name(rc),
               plait_last_error());
  cr_expect(strstr(plait_last_error(), "does not fit") && strstr(plait_last_error(), words),
            "the message does not say \"%s\": %s", words, plait_last_error());
}

Test(wire, encoders_refuse_values_their_fields_cannot_carry) {
  plait_meta_t m = {0};
  m.coll = PLAIT_COLL_ALLTOALL;
  m.dtype = PLAIT_FLOAT32;
  m.ndim = 1;
  m.shape[0] = 4;
  m.nsplits = 70000; /* one per rank: more ranks than the decoder takes */
  m.splits = calloc(m.nsplits, sizeof *m.splits);
  cr_assert_not_null(m.splits);
  plait_request_t rq[1] = {{"a2a", -1, m}};
  plait_request_list_t rl = {0, 1, rq, 0};
  expect_unfit(plait_requests_encode(&W, &rl), "alltoall splits");
  free(m.splits);

  static char long_name[PLAIT_MAX_NAME + 2];
  memset(long_name, 'n', sizeof long_name - 1);
  plait_meta_t m2 = {0};
  m2.coll = PLAIT_COLL_ALLREDUCE;
  plait_request_t rq2[1] = {{long_name, -1, m2}};
  plait_request_list_t rl2 = {0, 1, rq2, 0};
  expect_unfit(plait_requests_encode(&W, &rl2), "tensor name");

  plait_wr_begin(&W, PLAIT_MSG_BOOT_DATA);
  plait_wr_blob(&W, "x", (size_t)UINT32_MAX + 1); /* refused before it reads a byte */
  expect_unfit(plait_wr_end(&W), "4 GiB");

  /* the writer starts clean for the next frame */
  plait_request_list_t ok = {0, 1, rq2, 0};
  long_name[PLAIT_MAX_NAME] = '\0';
  cr_assert_eq(plait_requests_encode(&W, &ok), PLAIT_SUCCESS, "%s", plait_last_error());
}

/* A failed response's message longer than the decoder takes is cut, so the
 * response still arrives. */
Test(wire, long_failure_message_is_cut_not_refused) {
  static char msg[20000];
  memset(msg, 'm', sizeof msg - 1);
  plait_response_t rs[1] = {{PLAIT_COLL_ALLREDUCE, PLAIT_ERR_MISMATCH, msg, 0, NULL, NULL, 0, -1, 0}};
  plait_response_list_t rsl = {.flags = 0, .shutdown_rank = -1, .n = 1, .r = rs}, back;
  cr_assert_eq(plait_responses_encode(&W, &rsl), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_responses_decode(W.data + 12, W.len - 12, &back), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_eq(strlen(back.r[0].message), 8192);
  plait_responses_free(&back);
}

/* Autotuned settings travel with a response list (version 3): they come back
 * as sent, a list without them carries none, and a malformed value or an
 * unknown flag is refused. */
Test(wire, response_list_carries_autotuned_settings) {
  plait_response_t rs[1] = {{PLAIT_COLL_BARRIER, 0, NULL, 0, NULL, NULL, 0, -1, 0}};
  plait_response_list_t rsl = {.flags = PLAIT_RESP_TUNING, .shutdown_rank = -1, .n = 1, .r = rs,
                               .tuning = {2, 4u << 20, 1u << 20, 0.25}},
                        back;
  cr_assert_eq(plait_responses_encode(&W, &rsl), PLAIT_SUCCESS, "%s", plait_last_error());
  size_t with = W.len;
  cr_assert_eq(plait_responses_decode(W.data + 12, W.len - 12, &back), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_eq(back.flags, PLAIT_RESP_TUNING);
  cr_expect_eq(back.tuning.active, 2);
  cr_expect_eq(back.tuning.threshold, 4u << 20);
  cr_expect_eq(back.tuning.max_tensor, 1u << 20);
  cr_expect_float_eq(back.tuning.cycle_ms, 0.25, 1e-12);
  plait_responses_free(&back);
  /* a cycle time of 0 cannot be run with: refused */
  size_t at_cycle = with - 8;
  W.data[at_cycle] = W.data[at_cycle + 1] = W.data[at_cycle + 2] = W.data[at_cycle + 3] = 0;
  W.data[at_cycle + 4] = W.data[at_cycle + 5] = W.data[at_cycle + 6] = W.data[at_cycle + 7] = 0;
  cr_expect_eq(plait_responses_decode(W.data + 12, W.len - 12, &back), PLAIT_ERR_PROTOCOL);
  plait_wr_free(&W);
  memset(&W, 0, sizeof W);
  rsl.flags = 0;
  cr_assert_eq(plait_responses_encode(&W, &rsl), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(W.len, with - 25, "without the flag the 25 bytes of settings are not sent");
  cr_assert_eq(plait_responses_decode(W.data + 12, W.len - 12, &back), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_eq(back.tuning.active, 0);
  plait_responses_free(&back);
  W.data[12] = 0x8; /* a flag no version defines (0x4 is PLAIT_RESP_EPOCH) */
  cr_expect_eq(plait_responses_decode(W.data + 12, W.len - 12, &back), PLAIT_ERR_PROTOCOL);
}
