/*
 * Writes the fuzzers' seed corpora from valid inputs: every control-plane
 * message encoded by plait's own encoders (corpus/wire), a value for each
 * configuration variable (corpus/config) and plaitrun command lines
 * (corpus/plaitrun_args). ci/fuzz --seeds runs it into tests/fuzz/corpus;
 * the result is committed so that a fuzzing run starts from real messages.
 *
 *   fuzz_make_seeds <corpus-dir>
 */
#include "control/elastic_wire.h"
#include "control/messages.h"
#include "engine/negotiate/messages.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_root;
static int g_failed;

static void put(const char *sub, const char *name, const void *bytes, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_root, sub);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) g_failed = 1;
  snprintf(path, sizeof path, "%s/%s/%s", g_root, sub, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(bytes, 1, len, f) != len) g_failed = 1;
  if (f != NULL && fclose(f) != 0) g_failed = 1;
}

/* Writes a finished frame, after checking that it decodes. */
static void frame(const char *name, plait_writer_t *w, plait_result_t rc) {
  if (rc != PLAIT_SUCCESS || plait_neg_decode_frame(w->data, w->len) != PLAIT_SUCCESS) {
    fprintf(stderr, "fuzz_make_seeds: %s does not round-trip\n", name);
    g_failed = 1;
  }
  put("wire", name, w->data, w->len);
  plait_wr_free(w);
}

static void control_messages(void) {
  plait_writer_t w = {0};
  plait_msg_hello_t hello;
  memset(hello.nonce, 0x5a, sizeof hello.nonce);
  frame("hello", &w, plait_msg_encode_hello(&w, &hello));
  plait_msg_auth_t auth = {.rank = 1, .size = 4, .host = "node02", .local_rank = 1,
                           .local_size = 2};
  memset(auth.nonce, 1, sizeof auth.nonce);
  memset(auth.mac, 2, sizeof auth.mac);
  frame("auth", &w, plait_msg_encode_auth(&w, &auth));
  plait_msg_welcome_t welcome;
  memset(welcome.mac, 3, sizeof welcome.mac);
  frame("welcome", &w, plait_msg_encode_welcome(&w, &welcome));
  frame("reject", &w, plait_msg_encode_reject(&w, "rank 1 is already connected"));
  frame("abort", &w, plait_msg_encode_abort(&w, PLAIT_ERR_PEER_LOST, "rank 2 was lost"));
  char hosts[3][PLAIT_HOST_MAX] = {"node01", "node01", "node02"};
  int32_t lr[3] = {0, 1, -1}, ls[3] = {2, 2, -1};
  plait_msg_topology_t topo = {3, hosts, lr, ls};
  frame("topology", &w, plait_msg_encode_topology(&w, &topo));
  static const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  plait_msg_boot_data_t boot = {7, 1, 0, sizeof bytes, bytes, sizeof bytes};
  frame("boot_data", &w, plait_msg_encode_boot_data(&w, &boot));
  plait_msg_boot_result_t result = {7, 0, "", bytes, sizeof bytes};
  frame("boot_result", &w, plait_msg_encode_boot_result(&w, &result));
  plait_msg_auth_t elastic_auth = auth; /* an elastic job's: the epoch at the end */
  elastic_auth.epoch = 3;
  frame("auth_epoch", &w, plait_msg_encode_auth(&w, &elastic_auth));
}

static void elastic_messages(void) {
  plait_writer_t w = {0};
  plait_el_join_t join = {"10.0.0.2/1", 2, "10.0.0.2:40123", 2, {1, 3}};
  frame("el_join", &w, plait_el_encode_join(&w, &join));
  plait_el_assign_t assign = {3, 1, 4, 1, 2, 0, 2, "10.0.0.1:40000"};
  frame("el_assign", &w, plait_el_encode_assign(&w, &assign));
  frame("el_stop", &w, plait_el_encode_stop(&w, "its host was removed from the host list"));
  frame("el_poll", &w, plait_el_encode_poll(&w, 3));
  plait_el_updates_t updates = {5, 1};
  frame("el_updates", &w, plait_el_encode_updates(&w, &updates));
}

static void negotiation_messages(void) {
  plait_writer_t w = {0};
  int64_t splits[2] = {3, 1};
  plait_request_t reqs[3] = {
      {"grad/layer1", -1, {.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32,
                           .op = PLAIT_OP_SUM, .ndim = 2, .device = -1, .prescale = 1.0,
                           .postscale = 0.5, .shape = {4, 3}}},
      {NULL, 5, {.coll = PLAIT_COLL_ALLREDUCE}},
      {"a2a", -1, {.coll = PLAIT_COLL_ALLTOALL, .dtype = PLAIT_INT64, .ndim = 1,
                   .device = -1, .shape = {4}, .splits = splits, .nsplits = 2}},
  };
  plait_request_list_t rl = {0, 3, reqs, 12};
  frame("requests", &w, plait_requests_encode(&w, &rl));
  plait_request_list_t shut = {PLAIT_REQ_SHUTDOWN, 0, NULL, 13};
  frame("requests_shutdown", &w, plait_requests_encode(&w, &shut));
  plait_request_list_t failed = {PLAIT_REQ_FAILED, 0, NULL, 14};
  frame("requests_failed", &w,
        plait_requests_encode_failure(&w, &failed, PLAIT_ERR_TRANSPORT,
                                      "allreduce: receive from rank 1 failed: Truncation error"));

  plait_resp_entry_t entries[2] = {
      {"grad/layer1", -1, 0, 1, {.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32,
                                 .op = PLAIT_OP_SUM, .ndim = 1, .device = -1,
                                 .prescale = 1.0, .postscale = 1.0, .shape = {12}}, 0},
      {"grad/layer2", 3, -1, 0, {0}, 0},
  };
  int64_t dims[2] = {2, 5};
  plait_response_t resp[3] = {
      {.coll = PLAIT_COLL_ALLREDUCE, .n = 2, .e = entries, .join_rank = -1},
      {.coll = PLAIT_COLL_ALLGATHER, .n = 1, .e = entries, .dims = dims, .ndims = 2,
       .join_rank = -1},
      {.coll = PLAIT_COLL_BROADCAST, .status = PLAIT_ERR_MISMATCH,
       .message = "tensor 'x': root 0 on rank 0, 1 on rank 1", .n = 1, .e = entries,
       .join_rank = -1},
  };
  plait_response_list_t list = {.flags = 0, .shutdown_rank = -1, .n = 3, .r = resp};
  frame("responses", &w, plait_responses_encode(&w, &list));
  plait_response_list_t down = {.flags = PLAIT_RESP_SHUTDOWN, .shutdown_rank = 1, .n = 0, .r = NULL};
  frame("responses_shutdown", &w, plait_responses_encode(&w, &down));
  /* up the control tree (control/tree.h): rank 1 relays its own and rank 5's
   * requests (fuzz_wire reads it as rank 0 of 64 ranks, fan-out 4) */
  plait_writer_t req = {0};
  if (plait_requests_encode(&req, &rl) != PLAIT_SUCCESS) g_failed = 1;
  plait_wr_begin(&w, PLAIT_MSG_RELAYED);
  plait_wr_u32(&w, 2);
  for (uint32_t origin = 1; origin <= 5; origin += 4) {
    plait_wr_u32(&w, origin);
    plait_wr_blob(&w, req.data + PLAIT_WIRE_HEADER_SIZE, req.len - PLAIT_WIRE_HEADER_SIZE);
  }
  if (plait_wr_end(&w) != PLAIT_SUCCESS) g_failed = 1;
  put("wire", "relayed", w.data, w.len); /* not a negotiation frame: not checked by frame() */
  plait_wr_free(&w);
  plait_wr_free(&req);
  plait_response_list_t tuned = {.flags = PLAIT_RESP_TUNING, .shutdown_rank = -1, .n = 1,
                                 .r = resp, .tuning = {1, 4u << 20, 1u << 20, 0.5}};
  frame("responses_tuning", &w, plait_responses_encode(&w, &tuned));
}

/* One config seed: the variable's index byte, then the value. */
static void config_seed(unsigned index, const char *value) {
  char buf[256];
  size_t len = strlen(value);
  buf[0] = (char)index;
  memcpy(buf + 1, value, len);
  char name[32];
  snprintf(name, sizeof name, "var%02u_%zu", index, len);
  put("config", name, buf, len + 1);
}

static void config_values(void) {
  static const char *const values[] = {"64M", "1G", "0", "1", "true", "off", "info", "TRACE",
                                       "2.5", "node[03-05,7],gpu1", "127.0.0.1:29500",
                                       "[::1]:29556", "ofi", "/tmp/timeline-%r.json", "1e3"};
  unsigned n_values = sizeof values / sizeof values[0];
  for (unsigned i = 0; i < 60; i++) config_seed(i, values[i % n_values]);
}

/* plaitrun seeds: fields separated by NUL, the first one the file "f". */
static void args_seed(const char *name, const char *const *fields, size_t n) {
  char buf[1024];
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(fields[i]);
    memcpy(buf + len, fields[i], l);
    len += l;
    if (i + 1 < n) buf[len++] = '\0';
  }
  put("plaitrun_args", name, buf, len);
}

static void plaitrun_args(void) {
  const char *a[] = {"", "-np", "4", "python3", "train.py"};
  args_seed("np", a, 5);
  const char *b[] = {"", "--np=2", "--grace=0.5", "--no-prefix", "--", "prog", "-np", "8"};
  args_seed("grace", b, 8);
  const char *c[] = {"", "-np", "4", "-H", "localhost:2,127.0.0.1:2", "--gloo",
                     "--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5", "prog"};
  args_seed("horovod", c, 11);
  const char *d[] = {"localhost slots=2\n# comment\n127.0.0.1 slots=2\n", "-np", "3",
                     "--hostfile", "f", "--log-level", "debug", "--verbose", "prog"};
  args_seed("hostfile", d, 9);
  const char *e[] = {"", "-np", "2", "--start-timeout", "30", "--no-stall-check",
                     "--timeline-filename", "tl.json", "--output-filename", "out", "prog"};
  args_seed("timeline", e, 11);
  const char *f[] = {"", "--help-env"};
  args_seed("help_env", f, 2);
  const char *g[] = {"", "-np", "2", "-H", "nodeA:1,nodeB:1", "-p", "2222", "-i", "key",
                     "prog"};
  args_seed("ssh", g, 10);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_seeds <corpus-dir>\n");
    return 2;
  }
  g_root = argv[1];
  if (mkdir(g_root, 0755) != 0 && errno != EEXIST) {
    perror(g_root);
    return 1;
  }
  control_messages();
  negotiation_messages();
  elastic_messages();
  config_values();
  plaitrun_args();
  return g_failed;
}
