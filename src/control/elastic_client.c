/* The worker's side of the elastic rendezvous (elastic_client.h). */
#include "control/elastic_client.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/auth.h"
#include "control/control.h"
#include "control/elastic_wire.h"
#include "control/messages.h"
#include "control/net.h"
#include "util/error.h"
#include "util/log.h"

#define CONNECT_S 10.0   /* a driver that cannot be reached this long is gone */
#define HANDSHAKE_S 10.0 /* the driver answers the handshake within this */
#define ANSWER_SLACK_S 30.0

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t last_epoch; /* the epoch of this process's last ASSIGN; 0: none */
  int removed;         /* the last JOIN was answered STOP */
  uint32_t n_lost;
  int32_t lost[PLAIT_EL_LOST_MAX]; /* ranks of last_epoch named lost */
} state;

int plait_el_driver_valid(const char *text) {
  char host[PLAIT_HOST_MAX];
  int port;
  if (!text || !*text) return 0;
  char saved[2048];
  snprintf(saved, sizeof saved, "%s", plait_last_error());
  int ok = plait_net_parse_hostport(text, "PLAIT_ELASTIC_DRIVER", host, sizeof host, &port) ==
               PLAIT_SUCCESS && port > 0;
  plait_error(PLAIT_SUCCESS, "%s", saved); /* asking leaves the last error as it was */
  return ok;
}

int plait_el_removed(void) {
  pthread_mutex_lock(&state_lock);
  int r = state.removed;
  pthread_mutex_unlock(&state_lock);
  return r;
}

static void note_rank(int rank) {
  for (uint32_t i = 0; i < state.n_lost; i++)
    if (state.lost[i] == rank) return;
  if (state.n_lost < PLAIT_EL_LOST_MAX) state.lost[state.n_lost++] = rank;
}

/* Reads the list after "rank " / "ranks " up to " was lost" / " were lost". */
static void note_list(const char *p, int size) {
  while (*p) {
    if (!isdigit((unsigned char)*p)) return;
    char *end;
    long r = strtol(p, &end, 10);
    if (r >= 0 && r < size) note_rank((int)r);
    if (strncmp(end, ", ", 2)) return;
    p = end + 2;
  }
}

void plait_el_note_failure(uint64_t epoch, int size, const char *text) {
  if (!epoch || !text) return;
  pthread_mutex_lock(&state_lock);
  if (epoch == state.last_epoch) {
    for (const char *p = strstr(text, "rank"); p; p = strstr(p + 4, "rank")) {
      const char *list = !strncmp(p, "ranks ", 6) ? p + 6 : !strncmp(p, "rank ", 5) ? p + 5 : NULL;
      if (!list) continue;
      const char *end = list + strspn(list, "0123456789, ");
      if (!strncmp(end, "was lost", 8) || !strncmp(end, "were lost", 9) ||
          !strncmp(end, "... were lost", 13))
        note_list(list, size);
    }
  }
  pthread_mutex_unlock(&state_lock);
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Connects to the driver, retrying what may pass (refused while it starts,
 * unreachable) for CONNECT_S at most. */
static plait_result_t connect_driver(const char *driver, double deadline, int *fd) {
  char host[PLAIT_HOST_MAX];
  int port, transient = 0;
  PLAIT_CHECK(plait_net_parse_hostport(driver, "PLAIT_ELASTIC_DRIVER", host, sizeof host, &port));
  double give_up = plait_now() + CONNECT_S;
  if (give_up > deadline) give_up = deadline;
  double backoff = 0.05;
  for (;;) {
    double now = plait_now();
    plait_result_t rc = plait_net_connect(host, port, now + 5.0 < give_up ? now + 5.0 : give_up,
                                          fd, &transient);
    if (rc == PLAIT_SUCCESS) return PLAIT_SUCCESS;
    if (!transient || plait_now() + backoff >= give_up) {
      char why[256]; /* a copy: plait_error writes where plait_last_error points */
      snprintf(why, sizeof why, "%s", plait_last_error());
      return plait_error(PLAIT_ERR_PEER_LOST, "cannot reach the elastic driver at %s "
                         "(PLAIT_ELASTIC_DRIVER): %s; if that name or address is wrong for "
                         "this host, start plaitrun with PLAITRUN_ELASTIC_HOST set to an "
                         "address of its host that the workers reach", driver, why);
    }
    sleep_s(backoff);
    backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
  }
}

static plait_result_t send_frame(int fd, plait_writer_t *w, plait_result_t rc, const char *driver,
                                 const char *what) {
  if (rc == PLAIT_SUCCESS && plait_net_write_full(fd, w->data, w->len, plait_now() + HANDSHAKE_S) !=
                                 PLAIT_IO_OK)
    rc = plait_error(PLAIT_ERR_PEER_LOST, "the elastic driver at %s closed the connection while "
                     "this worker sent its %s", driver, what);
  plait_wr_free(w);
  return rc;
}

/* The handshake (elastic_wire.h): both sides prove they know the secret. */
static plait_result_t authenticate(int fd, const plait_config_t *cfg, uint64_t epoch,
                                   char *who) {
  const char *driver = cfg->elastic_driver;
  plait_frame_t f;
  double deadline = plait_now() + HANDSHAKE_S;
  PLAIT_CHECK(plait_control_read_frame(fd, PLAIT_EL_MAX_PAYLOAD, deadline, who, &f));
  plait_msg_hello_t hello;
  plait_result_t rc = f.type == PLAIT_MSG_HELLO
                          ? plait_msg_decode_hello(f.payload, f.length, &hello)
                          : plait_error(PLAIT_ERR_PROTOCOL, "%s did not open with a challenge "
                                        "(message type %u): is it plaitrun's elastic driver?",
                                        who, f.type);
  plait_frame_free(&f);
  PLAIT_CHECK(rc);
  plait_msg_auth_t m;
  memset(&m, 0, sizeof m);
  m.epoch = epoch;
  m.local_rank = m.local_size = -1;
  snprintf(m.host, sizeof m.host, "%s", cfg->elastic_worker);
  PLAIT_CHECK(plait_auth_nonce(m.nonce));
  PLAIT_CHECK(plait_auth_mac_epoch(cfg->secret, PLAIT_AUTH_ELASTIC_WORKER, hello.nonce, m.nonce, 0,
                                   0, epoch, m.mac));
  plait_writer_t w = {0};
  PLAIT_CHECK(send_frame(fd, &w, plait_msg_encode_auth(&w, &m), driver, "proof"));
  PLAIT_CHECK(plait_control_read_frame(fd, PLAIT_EL_MAX_PAYLOAD, deadline, who, &f));
  if (f.type == PLAIT_MSG_REJECT) {
    plait_msg_text_t why;
    int bad = plait_msg_decode_text(f.payload, f.length, 0, &why) != PLAIT_SUCCESS;
    rc = plait_error(PLAIT_ERR_AUTH, "%s refused worker %s: %s", who, cfg->elastic_worker,
                     bad ? "(no reason given)" : why.text);
  } else if (f.type == PLAIT_MSG_WELCOME) {
    plait_msg_welcome_t welcome;
    rc = plait_msg_decode_welcome(f.payload, f.length, &welcome);
    if (rc == PLAIT_SUCCESS &&
        !plait_auth_verify_epoch(cfg->secret, PLAIT_AUTH_ELASTIC_DRIVER, hello.nonce, m.nonce, 0,
                                 0, epoch, welcome.mac))
      rc = plait_error(PLAIT_ERR_AUTH, "%s could not prove it knows this job's PLAIT_SECRET: it "
                       "is not this job's elastic driver", who);
  } else {
    rc = plait_error(PLAIT_ERR_PROTOCOL, "%s sent message type %u during authentication", who,
                     f.type);
  }
  plait_frame_free(&f);
  return rc;
}

static plait_result_t check_config(const plait_config_t *cfg) {
  if (!plait_el_driver_valid(cfg->elastic_driver))
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_ELASTIC_DRIVER='%s' is not valid: expected "
                       "host:port (plaitrun's elastic driver sets it)", cfg->elastic_driver);
  if (!cfg->elastic_worker || !*cfg->elastic_worker)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_ELASTIC_WORKER is not set: an elastic worker "
                       "needs its name (host/slot; plaitrun's elastic driver sets it)");
  if (strlen(cfg->elastic_worker) >= PLAIT_EL_WORKER_MAX)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_ELASTIC_WORKER is longer than %d bytes",
                       PLAIT_EL_WORKER_MAX - 1);
  if (!cfg->secret || !*cfg->secret)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET is not set: an elastic worker proves to "
                       "its driver (PLAIT_ELASTIC_DRIVER=%s) that it knows the job's secret",
                       cfg->elastic_driver);
  return PLAIT_SUCCESS;
}

/* Opens an authenticated connection to the driver. */
static plait_result_t open_session(const plait_config_t *cfg, uint64_t epoch, double deadline,
                                   char *who, size_t who_cap, int *fd) {
  snprintf(who, who_cap, "the elastic driver at %s", cfg->elastic_driver);
  PLAIT_CHECK(check_config(cfg));
  PLAIT_CHECK(connect_driver(cfg->elastic_driver, deadline, fd));
  plait_result_t rc = authenticate(*fd, cfg, epoch, who);
  if (rc) plait_net_close(fd);
  return rc;
}

/* The listening socket rank 0 of the next job would use, on the address
 * this host reaches the driver from. */
static plait_result_t bind_rendezvous(int driver_fd, int *lfd, char *addr, size_t cap) {
  char ip[64];
  PLAIT_CHECK(plait_net_local_ip(driver_fd, ip, sizeof ip));
  PLAIT_CHECK(plait_net_listen(ip, 0, lfd));
  int port = plait_net_local_port(*lfd);
  if (!port) {
    plait_net_close(lfd);
    return plait_error(PLAIT_ERR_SYSTEM, "cannot read the port of the socket bound on %s", ip);
  }
  plait_net_format_hostport(ip, port, addr, cap);
  return PLAIT_SUCCESS;
}

static plait_result_t send_join(int fd, const plait_config_t *cfg, const char *addr) {
  plait_el_join_t j;
  memset(&j, 0, sizeof j);
  snprintf(j.worker, sizeof j.worker, "%s", cfg->elastic_worker);
  snprintf(j.rendezvous, sizeof j.rendezvous, "%s", addr);
  pthread_mutex_lock(&state_lock);
  j.last_epoch = state.last_epoch;
  j.n_lost = state.n_lost;
  memcpy(j.lost, state.lost, sizeof j.lost);
  pthread_mutex_unlock(&state_lock);
  plait_writer_t w = {0};
  return send_frame(fd, &w, plait_el_encode_join(&w, &j), cfg->elastic_driver, "JOIN");
}

/* Turns the driver's answer into t, or the error STOP stands for. */
static plait_result_t take_answer(const plait_config_t *cfg, const plait_frame_t *f,
                                  const char *who, plait_topology_t *t) {
  if (f->type == PLAIT_MSG_EL_STOP) {
    char reason[PLAIT_EL_TEXT_MAX];
    PLAIT_CHECK(plait_el_decode_stop(f->payload, f->length, reason));
    pthread_mutex_lock(&state_lock);
    state.removed = 1;
    pthread_mutex_unlock(&state_lock);
    return plait_error(PLAIT_ERR_SHUTDOWN, "%s has no place for worker %s in the next job: %s",
                       who, cfg->elastic_worker, *reason ? reason : "(no reason given)");
  }
  if (f->type != PLAIT_MSG_EL_ASSIGN)
    return plait_error(PLAIT_ERR_PROTOCOL, "%s answered JOIN with message type %u", who, f->type);
  plait_el_assign_t a;
  PLAIT_CHECK(plait_el_decode_assign(f->payload, f->length, &a));
  PLAIT_CHECK(plait_topology_from_elastic(cfg, &a, t));
  pthread_mutex_lock(&state_lock);
  state.last_epoch = a.epoch;
  state.n_lost = 0;
  pthread_mutex_unlock(&state_lock);
  return PLAIT_SUCCESS;
}

plait_result_t plait_el_join(const plait_config_t *cfg, plait_topology_t *t) {
  pthread_mutex_lock(&state_lock);
  state.removed = 0;
  uint64_t last = state.last_epoch;
  pthread_mutex_unlock(&state_lock);
  double wait_s = cfg->elastic_timeout_s + ANSWER_SLACK_S;
  double deadline = plait_now() + wait_s;
  char who[PLAIT_HOST_MAX + 64], addr[PLAIT_EL_ADDR_MAX];
  int fd = -1, lfd = -1;
  plait_frame_t f = {0};
  plait_result_t rc;
  PLAIT_CHECK_GOTO(rc, open_session(cfg, last, deadline, who, sizeof who, &fd), out);
  PLAIT_CHECK_GOTO(rc, bind_rendezvous(fd, &lfd, addr, sizeof addr), out);
  PLAIT_CHECK_GOTO(rc, send_join(fd, cfg, addr), out);
  PLAIT_DEBUG("elastic", "worker %s (last epoch %llu) asked %s for a place; rendezvous %s",
              cfg->elastic_worker, (unsigned long long)last, who, addr);
  rc = plait_control_read_frame(fd, PLAIT_EL_MAX_PAYLOAD, deadline, who, &f);
  if (rc) {
    rc = plait_error_context(rc, "worker %s waited for its place in the next elastic job "
                             "(at most PLAIT_ELASTIC_TIMEOUT_S + 30 = %.0f s)",
                             cfg->elastic_worker, wait_s);
    goto out;
  }
  PLAIT_CHECK_GOTO(rc, take_answer(cfg, &f, who, t), out);
  char given[PLAIT_HOST_MAX + 16];
  plait_net_format_hostport(t->rendezvous_host, t->rendezvous_port, given, sizeof given);
  if (t->rank == 0 && strcmp(given, addr)) { /* the others would knock at another door */
    rc = plait_error(PLAIT_ERR_PROTOCOL, "%s made worker %s rank 0 of epoch %llu with the "
                     "rendezvous %s, but it listens on %s (the address its JOIN sent)", who,
                     cfg->elastic_worker, (unsigned long long)t->epoch, given, addr);
    goto out;
  }
  if (t->rank == 0) {
    t->listen_fd = lfd; /* the control plane's listener now */
    lfd = -1;
  }
out:
  plait_frame_free(&f);
  plait_net_close(&lfd);
  plait_net_close(&fd);
  return rc;
}

plait_result_t plait_el_poll(const plait_config_t *cfg, uint64_t epoch, double timeout_s,
                             uint64_t *timestamp, unsigned *update) {
  double deadline = plait_now() + timeout_s;
  char who[PLAIT_HOST_MAX + 64];
  int fd = -1;
  PLAIT_CHECK(open_session(cfg, epoch, deadline, who, sizeof who, &fd));
  plait_writer_t w = {0};
  plait_frame_t f = {0};
  plait_result_t rc = send_frame(fd, &w, plait_el_encode_poll(&w, epoch), cfg->elastic_driver,
                                 "POLL");
  if (rc == PLAIT_SUCCESS)
    rc = plait_control_read_frame(fd, PLAIT_EL_MAX_PAYLOAD, deadline, who, &f);
  if (rc == PLAIT_SUCCESS && f.type != PLAIT_MSG_EL_UPDATES)
    rc = plait_error(PLAIT_ERR_PROTOCOL, "%s answered POLL with message type %u", who, f.type);
  plait_el_updates_t u;
  if (rc == PLAIT_SUCCESS) rc = plait_el_decode_updates(f.payload, f.length, &u);
  if (rc == PLAIT_SUCCESS) {
    *timestamp = u.timestamp;
    *update = u.update;
  }
  plait_frame_free(&f);
  plait_net_close(&fd);
  return rc;
}
