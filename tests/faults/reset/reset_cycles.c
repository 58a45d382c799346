/*
 * The engine shut down and started again in one process, many times, as
 * elastic training does (issue 38 item 1, the elastic lanes' reset): this
 * process (the survivor) runs cycles of plait_init, collectives of each kind
 * and plait_shutdown, each cycle a new job of R processes: itself and R - 1
 * fresh peer processes (this program again, exec'd with --peer) on a fresh
 * rendezvous port and secret. Every other cycle fails on purpose: a peer
 * SIGKILLs itself in the middle of an allreduce, the survivor must see
 * PLAIT_ERR_PEER_LOST naming it, and shuts down. The survivor's rank turns
 * with the cycle (rank 0, whose process holds the control plane, and not).
 *
 * After each cycle the survivor reads its gauges (gauges.h: fds, threads,
 * /dev/shm entries, RSS, heap); after a warm-up, none may grow beyond its
 * allowance by the last cycle. Prints the first and last values.
 *
 *   reset_cycles --transport gloo|ofi-shm|ofi-tcp [--cycles N] [--ranks R]
 *                [--kill-in-lock | --stop-peer] [--away NETNS ADDR PEER_ADDR]
 *
 * --kill-in-lock: the victim dies holding a spin lock of libfabric's, so
 * that over shm the survivor spins on it and the ofi plugin's watchdog
 * rescues it (its endpoint then parked, closed at the next init: parked.h).
 * --stop-peer: the victim SIGSTOPs itself instead, and is SIGKILLed only
 * after the survivor's plait_shutdown: when the survivor's endpoint breaks,
 * its peer may still be alive (over ofi tcp the endpoint is then parked:
 * plugins/ofi/robustness/parked.h).
 * --away: the peers run on another host (away.h: network namespace NETNS,
 * each in a pid namespace of its own), this process at ADDR, the peers at
 * PEER_ADDR (the rendezvous is rank 0's address): their pids cannot be
 * checked from here (tests/tools/hosts/reset.sh).
 * N defaults to PLAIT_RESET_CYCLES, else 50; R to 3. PLAIT_LOG_LEVEL, if set, is
 * kept (else error: the kills warn). Exit 0: passed; 1:
 * failed (a cycle went wrong or a gauge grew, said on the last line); 2: bad
 * arguments; 77: --kill-in-lock and no survivor rescued after the warm-up
 * (nothing measured).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "away.h"
#include "gauges.h"
#include "plait/plait.h"
#include "ranks.h"
#include "workload.h"

#define MAX_RANKS 8
#define WARMUP 4           /* cycles before the first measurement: a clean and a failed one twice */
#define PEER_WAIT_S 90.0   /* a peer still running after this long is a hang */
#define RESCUE_HEAP_KIB 64 /* the heap a rescue may keep (--kill-in-lock, below) */
#define RSS_FLOOR 5        /* the last cycles whose lowest RSS is compared (gauges.h) */

typedef struct opts {
  const char *transport;
  int cycles, ranks;
  int in_lock; /* --kill-in-lock */
  int stop;    /* --stop-peer */
  const char *netns, *addr, *peer_addr; /* --away, else NULL, 127.0.0.1, 127.0.0.1 */
} opts_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The variables that change every cycle, each in a buffer of its own that
 * putenv keeps: setenv would leave the old value behind each time (glibc
 * never frees it), a heap leak of the test's own. */
enum { V_RANK, V_LOCAL_RANK, V_SIZE, V_LOCAL_SIZE, V_RDV, V_SECRET, V_COUNT };
static char env_slot[V_COUNT][128];

static void put_var(int slot, const char *name, const char *value) {
  snprintf(env_slot[slot], sizeof env_slot[slot], "%s=%s", name, value);
  putenv(env_slot[slot]);
}

static void set_int(int slot, const char *name, int v) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d", v);
  put_var(slot, name, buf);
}

/* The transport's variables, once for the whole run (inherited by peers). */
static int set_transport(const char *t) {
  unsetenv("FI_PROVIDER");
  if (strcmp(t, "gloo") == 0) {
    setenv("PLAIT_TRANSPORT", "gloo", 1);
  } else if (strcmp(t, "ofi-shm") == 0) {
    setenv("PLAIT_TRANSPORT", "ofi", 1);
    setenv("FI_PROVIDER", "shm", 1);
  } else if (strcmp(t, "ofi-tcp") == 0) {
    setenv("PLAIT_TRANSPORT", "ofi", 1);
    setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
  } else {
    fprintf(stderr, "reset_cycles: --transport %s: want gloo, ofi-shm or ofi-tcp\n", t);
    return -1;
  }
  setenv("PLAIT_TIMEOUT_S", "5", 1);
  if (!getenv("PLAIT_LOG_LEVEL")) setenv("PLAIT_LOG_LEVEL", "error", 1); /* the kills warn */
  return 0;
}

/* The cycle's plan: odd cycles fail; the victim and the kill's moment vary. */
static cycle_plan_t plan_of(int cycle, int ranks, int survivor, int in_lock, int stop) {
  cycle_plan_t p = {-1, 0, 0, cycle % ranks, in_lock, stop};
  if (cycle % 2 == 1) {
    p.victim = (survivor + 1 + (cycle / 2) % (ranks - 1)) % ranks;
    p.kill_at = (cycle / 2) % 3;
    p.kill_us = (cycle * 7919) % 3000;
  }
  return p;
}

/* Forks peer `rank`; `local`: its local rank (--away: among the peers). */
static pid_t start_peer(int rank, int local, const cycle_plan_t *p, const char *netns) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (netns && away_enter(netns) != 0) {
    fprintf(stderr, "reset peer: cannot run on host %s: %s\n", netns, strerror(errno));
    _exit(126);
  }
  set_int(V_RANK, "PLAIT_RANK", rank);
  set_int(V_LOCAL_RANK, "PLAIT_LOCAL_RANK", local);
  if (netns) set_int(V_LOCAL_SIZE, "PLAIT_LOCAL_SIZE", atoi(getenv("PLAIT_SIZE")) - 1);
  char a[6][16];
  snprintf(a[0], 16, "%d", p->victim), snprintf(a[1], 16, "%d", p->kill_at);
  snprintf(a[2], 16, "%d", p->kill_us), snprintf(a[3], 16, "%d", p->root);
  snprintf(a[4], 16, "%d", p->in_lock), snprintf(a[5], 16, "%d", p->stop);
  execl("/proc/self/exe", "reset_cycles", "--peer", a[0], a[1], a[2], a[3], a[4], a[5],
        (char *)NULL);
  _exit(126);
}

static int run_peer(char **argv) {
  cycle_plan_t p = {atoi(argv[0]), atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
                    atoi(argv[5])};
  char why[2048];
  int bad = workload_run(&p, why, sizeof why);
  if (bad) fprintf(stderr, "reset peer: %s\n", why);
  return bad;
}

/* Waits (bounded) for the peers; 0 when each ended as planned: the victim
 * killed by SIGKILL, the others exit 0. A peer still there is killed. */
static int reap_peers(pid_t *pids, int ranks, int survivor, const cycle_plan_t *p, char *why,
                      size_t len) {
  double t0 = now();
  int bad = 0;
  for (int r = 0; r < ranks; r++) {
    if (r == survivor) continue;
    /* --stop-peer: the victim, stopped since the failure, dies only now,
     * after the survivor's plait_shutdown */
    if (p->stop && r == p->victim) kill(pids[r], SIGKILL);
    int st = 0;
    pid_t got;
    while ((got = waitpid(pids[r], &st, WNOHANG)) == 0 && now() - t0 < PEER_WAIT_S)
      usleep(10 * 1000);
    if (got == 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &st, 0);
      bad = snprintf(why, len, "peer rank %d still running after %.0f s (killed)", r,
                     PEER_WAIT_S) > 0;
      continue;
    }
    /* a killed peer's shm regions stay until someone removes them (issue 38
     * item 2): removed as the harness does; the survivor's are counted */
    if (WIFSIGNALED(st)) plait_test_remove_shm_regions(pids[r]);
    int want_kill = r == p->victim;
    int ok = want_kill ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                       : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok)
      bad = snprintf(why, len, "peer rank %d: %s %d (want %s)", r,
                     WIFSIGNALED(st) ? "signal" : "exit status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                     want_kill ? "SIGKILL" : "exit 0") > 0;
  }
  return bad;
}

/* One cycle: a fresh job on a fresh port. 0 when it went as planned. */
static int cycle(const opts_t *o, int c, double *took) {
  int survivor = c % o->ranks;
  cycle_plan_t p = plan_of(c, o->ranks, survivor, o->in_lock, o->stop);
  char rdv[64], secret[65];
  snprintf(rdv, sizeof rdv, "%s:%d", survivor == 0 ? o->addr : o->peer_addr,
           plait_test_free_port());
  plait_test_make_secret(secret);
  put_var(V_RDV, "PLAIT_RENDEZVOUS", rdv);
  put_var(V_SECRET, "PLAIT_SECRET", secret);
  set_int(V_SIZE, "PLAIT_SIZE", o->ranks);
  set_int(V_LOCAL_SIZE, "PLAIT_LOCAL_SIZE", o->ranks);
  pid_t pids[MAX_RANKS] = {0};
  for (int r = 0; r < o->ranks; r++) {
    int local = o->netns && r > survivor ? r - 1 : r; /* --away: the peers' host has R - 1 */
    if (r != survivor && (pids[r] = start_peer(r, local, &p, o->netns)) < 0) {
      fprintf(stderr, "cycle %d: fork: %s\n", c, strerror(errno));
      return 1;
    }
  }
  set_int(V_RANK, "PLAIT_RANK", survivor);
  set_int(V_LOCAL_RANK, "PLAIT_LOCAL_RANK", o->netns ? 0 : survivor);
  if (o->netns) set_int(V_LOCAL_SIZE, "PLAIT_LOCAL_SIZE", 1);
  double t0 = now();
  char why[2048], peers[512] = "";
  int bad = workload_run(&p, why, sizeof why);
  int peers_bad = reap_peers(pids, o->ranks, survivor, &p, peers, sizeof peers);
  *took = now() - t0;
  if (bad) fprintf(stderr, "cycle %d (%s): survivor %s\n", c, p.victim < 0 ? "clean" : "kill", why);
  if (peers_bad) fprintf(stderr, "cycle %d (%s): %s\n", c, p.victim < 0 ? "clean" : "kill", peers);
  return bad || peers_bad;
}

static int parse(int argc, char **argv, opts_t *o) {
  const char *env = getenv("PLAIT_RESET_CYCLES");
  o->transport = NULL;
  o->cycles = env && *env ? atoi(env) : 50;
  o->ranks = 3;
  o->in_lock = o->stop = 0;
  o->netns = NULL, o->addr = o->peer_addr = "127.0.0.1";
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--transport") == 0) o->transport = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--cycles") == 0) o->cycles = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--ranks") == 0) o->ranks = atoi(argv[++i]);
    else if (strcmp(argv[i], "--kill-in-lock") == 0) o->in_lock = 1;
    else if (strcmp(argv[i], "--stop-peer") == 0) o->stop = 1;
    else if (i + 3 < argc && strcmp(argv[i], "--away") == 0)
      o->netns = argv[i + 1], o->addr = argv[i + 2], o->peer_addr = argv[i + 3], i += 3;
    else {
      fprintf(stderr, "reset_cycles: unknown argument %s\n", argv[i]);
      return -1;
    }
  }
  if (!o->transport) fprintf(stderr, "reset_cycles: --transport is required\n");
  if (o->cycles < WARMUP + 2) fprintf(stderr, "reset_cycles: cycles must be >= %d\n", WARMUP + 2);
  if (o->ranks < 2 || o->ranks > MAX_RANKS)
    fprintf(stderr, "reset_cycles: ranks must be 2 to %d\n", MAX_RANKS);
  return !o->transport || o->cycles < WARMUP + 2 || o->ranks < 2 || o->ranks > MAX_RANKS ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 8 && strcmp(argv[1], "--peer") == 0) return run_peer(argv + 2);
  opts_t o;
  /* PLAIT_RESET_CYCLES is read before the job's variables are cleared */
  if (parse(argc, argv, &o)) return 2;
  /* --stop-peer, --kill-in-lock: a failed cycle's endpoint may stay parked
   * until the next init (a stopped peer is killed after the survivor's
   * shutdown; a rescued endpoint is closed then), so the gauges are compared
   * after clean cycles only: the first after the warm-up and the last (an
   * odd count of cycles ends on a clean one) */
  int parks = o.stop || o.in_lock;
  if (parks && o.cycles % 2 == 0) o.cycles++;
  const int base = WARMUP - 1 + parks;
  /* a log level given by hand outlives the clearing (the kills warn: error else) */
  char level[32] = "";
  if (getenv("PLAIT_LOG_LEVEL")) snprintf(level, sizeof level, "%s", getenv("PLAIT_LOG_LEVEL"));
  plait_test_clear_env();
  if (level[0]) setenv("PLAIT_LOG_LEVEL", level, 1);
  if (set_transport(o.transport)) return 2;
  plait_test_set_plugin_path();
  signal(SIGPIPE, SIG_IGN);
  gauges_t first = {0}, g;
  char line[256];
  int failed = 0;
  long rss[RSS_FLOOR];
  int rescues_at_base = 0;
  for (int c = 0; c < o.cycles && !failed; c++) {
    double took = 0;
    failed = cycle(&o, c, &took);
    gauges_read(&g);
    rss[c % RSS_FLOOR] = g.rss_kib;
    gauges_format(&g, line, sizeof line);
    printf("cycle %3d %-5s %5.2f s  %s\n", c, c % 2 ? (o.stop ? "stop" : "kill") : "clean", took,
           line);
    fflush(stdout);
    if (c == base) first = g, rescues_at_base = workload_rescues;
  }
  if (failed) {
    printf("reset_cycles %s: FAILED: a cycle went wrong (above)\n", o.transport);
    return 1;
  }
  char a[256], b[256], why[1024];
  gauges_format(&first, a, sizeof a);
  gauges_format(&g, b, sizeof b);
  for (int i = 0; i < RSS_FLOOR; i++)
    if (rss[i] < g.rss_kib) g.rss_kib = rss[i];
  printf("reset_cycles %s, %d ranks, %d cycles: after warm-up (cycle %d): %s\n", o.transport,
         o.ranks, o.cycles, base, a);
  printf("reset_cycles %s, %d ranks, %d cycles: after the last cycle:      %s (lowest RSS of "
         "the last %d: %ld KiB)\n", o.transport, o.ranks, o.cycles, b, RSS_FLOOR, g.rss_kib);
  if (getenv("PLAIT_RESET_SHOW_MAPS")) gauges_print_rss_maps(stdout, 8);
  /* --kill-in-lock: libfabric shm keeps a few KiB of each rescued endpoint
   * closed (4-11 KiB, and in 3 of 11 rescues about 52 KiB, not pinned down:
   * docs/soak.md); one left open is 1.5 MiB */
  long rescued = workload_rescues - rescues_at_base;
  if (o.in_lock) printf("reset_cycles %s: the survivor was rescued %ld times after the warm-up\n",
                        o.transport, rescued);
  if (gauges_grew(&first, &g, o.in_lock ? RESCUE_HEAP_KIB * rescued : 0, why, sizeof why)) {
    printf("reset_cycles %s: FAILED: %s; the mappings with most RSS now:\n", o.transport, why);
    gauges_print_rss_maps(stdout, 8);
    return 1;
  }
  /* --kill-in-lock: what it measures is a rescue after the warm-up; a run
   * without one (the victim's lock taken by no survivor) says so */
  if (o.in_lock && workload_rescues == rescues_at_base) {
    printf("reset_cycles %s: SKIP: no rescue after the warm-up, nothing measured\n", o.transport);
    return 77;
  }
  printf("reset_cycles %s: PASS\n", o.transport);
  return 0;
}
