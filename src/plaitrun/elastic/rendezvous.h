/*
 * plaitrun's elastic driver, rendezvous side: the server elastic workers ask
 * for their place in the next job (include/plait/elastic.h is the worker
 * side). Every connection proves it knows the job secret (HMAC
 * challenge-response, as the control plane; the secret never travels).
 * Non-blocking: the driver's loop polls the fds it gives and calls service;
 * one slow or hostile peer never stalls the others (bounded handshakes,
 * bounded frames).
 *
 * Requests a worker makes:
 *  - JOIN: "place me in the job after epoch last_epoch" (0: a new worker).
 *    It carries the worker's name (PLAIT_ELASTIC_WORKER), the address and
 *    port of a listening socket the worker has already bound (used as the
 *    control plane's rendezvous when this worker becomes rank 0), and the
 *    ranks its last job named lost (blame), so the driver need not wait for
 *    them. The connection stays open until the driver answers ASSIGN or STOP
 *    (or the worker gives up: the join disappears from pending).
 *  - POLL: host updates since the worker's epoch, answered at once from
 *    set_updates (plait_elastic_host_updates).
 *
 * Bounds (rendezvous.c): a connection must authenticate and send its request
 * within 5 s; frames are at most 4 KiB; at most 256 connections are open
 * (pending JOINs included; a new one displaces the oldest handshake). A
 * refusal is written to stderr on one line, "plaitrun elastic: refused
 * connection from ADDR:PORT: WHY" (the first 20 of them, then every 100th).
 * Single-threaded: every call from the driver's loop.
 */
#ifndef PLAITRUN_ELASTIC_RENDEZVOUS_H
#define PLAITRUN_ELASTIC_RENDEZVOUS_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define PLAITRUN_WORKER_NAME_MAX 128 /* "host/slot" */
#define PLAITRUN_ADDR_MAX 96         /* an address, IPv6 in brackets, and ":port" */
#define PLAITRUN_LOST_MAX 64         /* lost ranks a JOIN carries */

typedef struct plaitrun_rdv plaitrun_rdv_t;

typedef struct {
  char worker[PLAITRUN_WORKER_NAME_MAX]; /* PLAIT_ELASTIC_WORKER of the asker */
  uint64_t last_epoch;                   /* epoch it last ran in; 0 = never */
  char rendezvous[PLAITRUN_ADDR_MAX];    /* "addr:port" it listens on if made rank 0 */
  int lost[PLAITRUN_LOST_MAX];           /* ranks (of last_epoch) its last job named lost */
  int n_lost;
} plaitrun_rdv_join_t;

typedef struct {
  uint64_t epoch;
  int rank, size, local_rank, local_size, cross_rank, cross_size;
  char rendezvous[PLAITRUN_ADDR_MAX]; /* rank 0's join's rendezvous */
} plaitrun_rdv_assign_t;

/* Listens on bind_host, port 0 (the kernel's choice). secret: the job's.
 * 0 on success; -1 with err filled. */
int plaitrun_rdv_open(plaitrun_rdv_t **out, const char *bind_host, const char *secret, char *err,
                      size_t err_size);
/* "host:port" workers connect to (PLAIT_ELASTIC_DRIVER). */
const char *plaitrun_rdv_address(const plaitrun_rdv_t *r);
/* Fills at most cap pollfds (listening socket and every open connection);
 * returns how many. */
int plaitrun_rdv_pollfds(const plaitrun_rdv_t *r, struct pollfd *fds, int cap);
/* Accepts, authenticates and reads what is ready on fds (from pollfds, after
 * poll); drops connections that fail authentication, send garbage, or stall
 * a handshake past its bound. Logs each refusal once, naming the peer. */
void plaitrun_rdv_service(plaitrun_rdv_t *r, const struct pollfd *fds, int n);
/* Copies the JOINs waiting for an answer (at most cap); returns how many. */
int plaitrun_rdv_pending(const plaitrun_rdv_t *r, plaitrun_rdv_join_t *out, int cap);
/* Answers worker's pending JOIN with its place; 0, or -1 when it has none. */
int plaitrun_rdv_assign(plaitrun_rdv_t *r, const char *worker, const plaitrun_rdv_assign_t *a);
/* Answers worker's pending JOIN with "no place", reason given to it. */
int plaitrun_rdv_stop(plaitrun_rdv_t *r, const char *worker, const char *reason);
/* What POLLs are answered from now on (plait_elastic_host_updates): epoch is
 * the current job's; a POLL from another epoch gets PLAIT_HOSTS_REMOVED. */
void plaitrun_rdv_set_updates(plaitrun_rdv_t *r, uint64_t epoch, uint64_t timestamp,
                              unsigned update);
/* Closes every connection and the listening socket. */
void plaitrun_rdv_close(plaitrun_rdv_t *r);

#endif
