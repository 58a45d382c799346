/*
 * A stranger on a gloo pair's own listening socket, made to win the race
 * every time (plugins/gloo/handover.h). This gloo version opens a listener
 * for every pair and its event loop accepts whatever connects there first; in
 * the flake of test_intrusion (3 of 79 loaded runs of intrusion/junk*) the intruder
 * reached that listener between gloo's listen() and the plugin's connect(),
 * gloo took its connection for the peer's and read its bytes into the pair's
 * receive state, and the job's first allreduces timed out.
 *
 * Here two ranks (forked processes, on loopback) build the plugin's linked
 * context from its own sources, and rank 0's handover calls a test hook right
 * after gloo opened the listener for rank 1. The hook connects to it as a
 * stranger, sends the first 8 bytes of a gloo message header, and waits (up
 * to a few seconds) for gloo to accept the connection and read them, which it
 * always did before the fix. The plugin must refuse the stranger (closed and
 * logged) and the pair must work: allreduces give exact results.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "handover.h"
#include "links.h"

using namespace plait_gloo;

namespace {

constexpr double kWaitForGlooS = 3;  // for gloo to take the stranger (it did in ms)
constexpr int kElems = 70000;        // more than one gloo segment

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool same_address(const struct sockaddr_storage &a, const struct sockaddr_storage &b) {
  if (a.ss_family != AF_INET || b.ss_family != AF_INET) return false;
  auto &x = (const struct sockaddr_in &)a;
  auto &y = (const struct sockaddr_in &)b;
  return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
}

// A socket of this process accepted on `addr` with nothing left unread: gloo
// took a connection there and read what came.
bool gloo_took_it(const struct sockaddr_storage &addr) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool took = false;
  while (struct dirent *e = readdir(dir)) {
    int fd = atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    struct sockaddr_storage self, peer;
    socklen_t len = sizeof self, plen = sizeof peer;
    int unread = -1;
    if (getsockname(fd, (struct sockaddr *)&self, &len) == 0 && same_address(self, addr) &&
        getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 &&
        ioctl(fd, FIONREAD, &unread) == 0 && unread == 0)
      took = true;
  }
  closedir(dir);
  return took;
}

struct Stranger {
  int fd = -1;
  bool reached = false;  // connected and sent its bytes
  bool taken = false;    // gloo accepted it and read them
};

void stranger_hook(void *arg, int rank, const struct sockaddr_storage &addr) {
  auto *st = static_cast<Stranger *>(arg);
  if (rank != 1 || st->fd >= 0) return;  // once, on rank 0's pair for rank 1
  st->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (st->fd < 0 || connect(st->fd, (const struct sockaddr *)&addr, sizeof(sockaddr_in)) != 0)
    return;
  // The first field of a gloo message header (nbytes, 8 bytes of 48): gloo
  // keeps it and reads the rest of the header from whatever comes next.
  uint64_t nbytes = 48;
  st->reached = send(st->fd, &nbytes, sizeof nbytes, MSG_NOSIGNAL) == (ssize_t)sizeof nbytes;
  for (double end = now_s() + kWaitForGlooS; st->reached && now_s() < end; usleep(2000))
    if ((st->taken = gloo_took_it(addr))) break;
}

std::atomic<int> refusals_logged{0};

void log_fn(int level, const char *subsystem, const char *file, int line, const char *fmt, ...) {
  (void)level, (void)subsystem, (void)file, (void)line;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (std::strstr(msg, "refused a connection to gloo's listening socket")) refusals_logged++;
  fprintf(stderr, "[rank log] %s\n", msg);
}

// An allgather between the two ranks over a socketpair (fd: this rank's end).
Allgather pair_allgather(int fd, int rank) {
  return [fd, rank](const void *send, size_t bytes, void *recv) {
    auto *out = static_cast<unsigned char *>(recv);
    std::memcpy(out + (size_t)rank * bytes, send, bytes);
    if (write(fd, send, bytes) != (ssize_t)bytes) throw std::runtime_error("allgather: write");
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = read(fd, out + (size_t)(1 - rank) * bytes + got, bytes - got);
      if (n <= 0) throw std::runtime_error("allgather: read");
      got += (size_t)n;
    }
  };
}

// One rank; returns its exit status (0: every check passed).
int run_rank(int rank, int fd) {
  Stranger st;
  try {
    Links links;
    LinkLog log{log_fn, PLAIT_LOG_DEBUG};
    open_links(pair_allgather(fd, rank), rank, 2, "127.0.0.1", 20, log, links);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<LinkedContext>(rank, 2);
    context->setTimeout(std::chrono::seconds(5));
    PeerAddresses peers(2);
    HandoverOptions opt;
    opt.log = log;
    if (rank == 0) {
      opt.pair_listening = stranger_hook;
      opt.pair_listening_arg = &st;
    }
    context->connect(device, links, peers, opt);
    std::vector<float> x(kElems);
    for (int it = 0; it < 3; it++) {
      for (int i = 0; i < kElems; i++) x[(size_t)i] = (float)(rank + i % 7);
      gloo::AllreduceOptions ar(context);
      ar.setOutput(x.data(), x.size());
      ar.setReduceFunction(
          static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
      ar.setTag((uint32_t)it);
      gloo::allreduce(ar);
      for (int i = 0; i < kElems; i++)
        if (x[(size_t)i] != (float)(1 + 2 * (i % 7))) {
          fprintf(stderr, "[rank %d] allreduce %d: element %d is %g\n", rank, it, i,
                  (double)x[(size_t)i]);
          return 1;
        }
    }
  } catch (const std::exception &e) {
    fprintf(stderr, "[rank %d] failed: %s\n", rank, e.what());
    return 1;
  }
  if (rank != 0) return 0;
  if (!st.reached) {
    fprintf(stderr, "[rank 0] the stranger never reached gloo's listener: proves nothing\n");
    return 2;
  }
  char c;
  ssize_t n = recv(st.fd, &c, 1, MSG_DONTWAIT);
  bool closed = n == 0 || (n < 0 && errno == ECONNRESET);
  fprintf(stderr, "[rank 0] stranger: gloo %s it; its connection %s; %d refusal(s) logged\n",
          st.taken ? "took" : "never took", closed ? "was closed" : "is still open",
          refusals_logged.load());
  if (st.taken) return 3;
  if (!closed) return 4;
  return refusals_logged.load() == 1 ? 0 : 5;
}

}  // namespace

TestSuite(gloo_handover, .timeout = 120);

Test(gloo_handover, stranger_first_on_a_pairs_listener_is_refused) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  pid_t pid[2];
  for (int r = 0; r < 2; r++) {
    pid[r] = fork();
    cr_assert_geq(pid[r], 0, "fork: %s", strerror(errno));
    if (pid[r] == 0) {
      close(sv[1 - r]);
      _exit(run_rank(r, sv[r]));
    }
  }
  close(sv[0]);
  close(sv[1]);
  const char *why[] = {"ok", "a rank failed (see its message)",
                       "the stranger never reached the listener",
                       "gloo accepted the stranger and read its bytes",
                       "the stranger's connection was left open",
                       "the refusal was not logged exactly once"};
  for (int r = 0; r < 2; r++) {
    int status = 0;
    cr_assert_eq(waitpid(pid[r], &status, 0), pid[r]);
    cr_assert(WIFEXITED(status), "rank %d died of signal %d", r,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    int rc = WEXITSTATUS(status);
    cr_expect_eq(rc, 0, "rank %d: %s", r, rc < 6 ? why[rc] : "?");
  }
}
