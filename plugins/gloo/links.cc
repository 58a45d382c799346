#include "links.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>

#include "errors.h"
#include "log.h"

namespace plait_gloo {

namespace {

constexpr size_t kTokenBytes = 32;
// What each rank publishes: family (4 or 6), pad, port (network order),
// address (16 bytes, IPv4 in the first 4), token.
constexpr size_t kRecordBytes = 4 + 16 + kTokenBytes;
// What a connecting rank sends first: magic, rank (u32 little-endian), the
// listening rank's token.
constexpr char kMagic[4] = {'P', 'L', 'G', 'L'};
constexpr size_t kHelloBytes = 4 + 4 + kTokenBytes;
constexpr double kHelloDeadlineS = 5;  // for a connection to say who it is
constexpr size_t kMaxPending = 256;    // unidentified connections held at once

double now_s() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Pending {
  int fd;
  double deadline;
  size_t got;
  unsigned char hello[kHelloBytes];
};

std::string peer_name(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      auto *in = (struct sockaddr_in *)&ss;
      inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
      port = ntohs(in->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      auto *in6 = (struct sockaddr_in6 *)&ss;
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
      port = ntohs(in6->sin6_port);
    }
  }
  return std::string(ip) + ":" + std::to_string(port);
}

bool same_bytes(const unsigned char *a, const unsigned char *b, size_t n) {
  unsigned char diff = 0;  // constant time: no early exit on a token
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

// sockaddr for host_address with port 0, or throws.
socklen_t host_sockaddr(const char *host, struct sockaddr_storage &ss) {
  std::memset(&ss, 0, sizeof ss);
  auto *in = (struct sockaddr_in *)&ss;
  auto *in6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    return sizeof *in;
  }
  std::memset(&ss, 0, sizeof ss);
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    return sizeof *in6;
  }
  fail(PLAIT_ERR_INVALID_ARGUMENT,
       "init: host_address '%s' is not a numeric IPv4 or IPv6 address", host);
}

int open_listener(const char *host, unsigned char record[kRecordBytes]) {
  struct sockaddr_storage ss;
  socklen_t len = host_sockaddr(host, ss);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fail(PLAIT_ERR_SYSTEM, "init: socket() for plait's link listener: %s",
         std::strerror(errno));
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    fail(PLAIT_ERR_SYSTEM, "init: cannot listen on %s for plait's links: %s",
         host, std::strerror(e));
  }
  std::memset(record, 0, kRecordBytes);
  if (ss.ss_family == AF_INET) {
    auto *in = (struct sockaddr_in *)&ss;
    record[0] = 4;
    std::memcpy(record + 2, &in->sin_port, 2);
    std::memcpy(record + 4, &in->sin_addr, 4);
  } else {
    auto *in6 = (struct sockaddr_in6 *)&ss;
    record[0] = 6;
    std::memcpy(record + 2, &in6->sin6_port, 2);
    std::memcpy(record + 4, &in6->sin6_addr, 16);
  }
  return fd;
}

// Starts a non-blocking connect to the listener a record describes.
int start_connect(const unsigned char *record, int to) {
  struct sockaddr_storage ss;
  std::memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (record[0] == 4) {
    auto *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_port, record + 2, 2);
    std::memcpy(&in->sin_addr, record + 4, 4);
    len = sizeof *in;
  } else if (record[0] == 6) {
    auto *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_port, record + 2, 2);
    std::memcpy(&in6->sin6_addr, record + 4, 16);
    len = sizeof *in6;
  } else {
    fail(PLAIT_ERR_PROTOCOL, "init: rank %d published a link address of family %d",
         to, record[0]);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fail(PLAIT_ERR_SYSTEM, "init: socket() for the link to rank %d: %s", to,
         std::strerror(errno));
  if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    fail(PLAIT_ERR_PEER_LOST, "init: cannot connect to rank %d for plait's link: %s",
         to, std::strerror(e));
  }
  return fd;
}

// The whole exchange after the records are known; one object so that every
// socket is closed on every path.
struct Dialer {
  int me, n;
  const std::vector<unsigned char> &records;  // n * kRecordBytes
  const unsigned char *token;                 // this rank's
  const LinkLog &log;
  Links &links;
  int listener = -1;
  std::vector<int> outgoing{};  // by rank: connecting, hello not sent yet
  std::deque<Pending> pending{};
  unsigned refused = 0;

  ~Dialer() {
    if (listener >= 0) close(listener);
    for (int fd : outgoing)
      if (fd >= 0) close(fd);
    for (auto &p : pending) close(p.fd);
  }

  void refuse(const Pending &p, const char *why) {
    refused++;
    PLAIT_GLOO_LOG(log.log, log.level, PLAIT_LOG_DEBUG,
                   "refused a connection to plait's link listener from %s: %s",
                   peer_name(p.fd).c_str(), why);
    close(p.fd);
  }

  void send_hello(int to) {
    int fd = outgoing[(size_t)to];
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0)
      fail(PLAIT_ERR_PEER_LOST, "init: cannot connect to rank %d for plait's link: %s",
           to, std::strerror(err));
    unsigned char hello[kHelloBytes];
    std::memcpy(hello, kMagic, 4);
    for (int i = 0; i < 4; i++) hello[4 + i] = (unsigned char)((unsigned)me >> (8 * i));
    std::memcpy(hello + 8, &records[(size_t)to * kRecordBytes + 20], kTokenBytes);
    // A fresh socket's send buffer takes 40 bytes at once.
    if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello)
      fail(PLAIT_ERR_PEER_LOST, "init: cannot greet rank %d on plait's link: %s", to,
           std::strerror(errno));
    links.fd[(size_t)to] = fd;
    outgoing[(size_t)to] = -1;
  }

  // true when the connection is finished with (linked or refused).
  bool read_hello(Pending &p) {
    ssize_t got = recv(p.fd, p.hello + p.got, kHelloBytes - p.got, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (got <= 0) {
      refuse(p, "closed before saying who it is");
      return true;
    }
    p.got += (size_t)got;
    if (p.got < kHelloBytes) return false;
    uint32_t from = 0;
    for (int i = 0; i < 4; i++) from |= (uint32_t)p.hello[4 + i] << (8 * i);
    if (std::memcmp(p.hello, kMagic, 4) != 0) {
      refuse(p, "not a plait link hello");
    } else if (!same_bytes(p.hello + 8, token, kTokenBytes)) {
      refuse(p, "wrong token");
    } else if (from <= (uint32_t)me || from >= (uint32_t)n) {
      refuse(p, "names a rank that does not connect here");
    } else if (links.fd[from] >= 0) {
      refuse(p, "names a rank already linked");
    } else {
      links.fd[from] = p.fd;
      return true;
    }
    return true;
  }

  bool done() const {
    for (int r = 0; r < n; r++)
      if (r != me && links.fd[(size_t)r] < 0) return false;
    return true;
  }

  void accept_all() {
    for (;;) {
      int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a connection reset before we took it
      if (pending.size() >= kMaxPending) {
        refuse(pending.front(), "too many unidentified connections; oldest dropped");
        pending.pop_front();
      }
      pending.push_back(Pending{fd, now_s() + kHelloDeadlineS, 0, {}});
    }
  }

  void run(double limit_s) {
    double deadline = now_s() + limit_s;
    while (!done()) {
      double t = now_s();
      if (t >= deadline) {
        std::string missing;
        for (int r = 0; r < n; r++)
          if (r != me && links.fd[(size_t)r] < 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        fail(PLAIT_ERR_PEER_LOST,
             "init: no link with rank(s) %s after %.0f s (%u stray connection%s "
             "refused meanwhile)",
             missing.c_str(), limit_s, refused,
             refused == 1 ? "" : "s");
      }
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->deadline < t) {
          refuse(*it, "said nothing in time");
          it = pending.erase(it);
        } else {
          ++it;
        }
      }
      std::vector<struct pollfd> pfd;
      pfd.push_back({listener, POLLIN, 0});
      for (int r = 0; r < n; r++)
        if (outgoing[(size_t)r] >= 0) pfd.push_back({outgoing[(size_t)r], POLLOUT, 0});
      for (auto &p : pending) pfd.push_back({p.fd, POLLIN, 0});
      int ms = (int)((deadline - t) * 1000) + 1;
      if (ms > 200) ms = 200;
      if (poll(pfd.data(), pfd.size(), ms) < 0 && errno != EINTR)
        fail(PLAIT_ERR_SYSTEM, "init: poll() for plait's links: %s", std::strerror(errno));
      size_t i = 1;
      for (int r = 0; r < n; r++)
        if (outgoing[(size_t)r] >= 0 && pfd[i++].revents) send_hello(r);
      size_t np = pending.size();
      auto it = pending.begin();
      for (size_t k = 0; k < np; k++, i++) {
        if (pfd[i].revents && read_hello(*it))
          it = pending.erase(it);
        else
          ++it;
      }
      if (pfd[0].revents) accept_all();
    }
  }
};

}  // namespace

Links::~Links() {
  for (int fd : fd)
    if (fd >= 0) close(fd);
}

Allgather bootstrap_allgather(const plait_bootstrap_t *b) {
  return [b](const void *send, size_t bytes, void *recv) {
    plait_result_t rc = b->allgather(b->ctx, send, bytes, recv);
    if (rc != PLAIT_SUCCESS)
      fail(rc, "init: bootstrap allgather of %zu bytes for plait's links failed (%s)", bytes,
           plait_result_name_inline(rc));
  };
}

void open_links(const Allgather &allgather, int me, int n, const char *host,
                double timeout_s, const LinkLog &log, Links &links) {
  links.fd.assign((size_t)n, -1);
  unsigned char mine[kRecordBytes];
  std::vector<unsigned char> records((size_t)n * kRecordBytes);
  int listener = open_listener(host, mine);
  struct Guard {
    int &fd;
    ~Guard() {
      if (fd >= 0) close(fd);
    }
  } guard{listener};
  if (getrandom(mine + 20, kTokenBytes, 0) != (ssize_t)kTokenBytes)
    fail(PLAIT_ERR_SYSTEM, "init: getrandom() for a link token: %s", std::strerror(errno));
  allgather(mine, kRecordBytes, records.data());
  Dialer dialer{me, n, records, mine + 20, log, links, -1, {}, {}, 0};
  dialer.listener = listener;
  listener = -1;
  dialer.outgoing.assign((size_t)n, -1);
  unsigned char ok = 1;
  std::string why;
  plait_result_t code = PLAIT_SUCCESS;
  try {
    for (int r = 0; r < me; r++)
      dialer.outgoing[(size_t)r] = start_connect(&records[(size_t)r * kRecordBytes], r);
    dialer.run(timeout_s > 0 ? timeout_s : 60);
  } catch (const Error &e) {
    ok = 0;
    why = e.what();
    code = e.code();
  }
  std::vector<unsigned char> all((size_t)n);
  try {
    allgather(&ok, 1, all.data());
  } catch (const Error &) {
    if (!ok) fail(code, "%s", why.c_str());
    throw;
  }
  if (!ok) fail(code, "%s", why.c_str());
  for (int r = 0; r < n; r++)
    if (!all[(size_t)r])
      fail(PLAIT_ERR_PEER_LOST, "init: rank %d could not make its links", r);
  if (dialer.refused)
    PLAIT_GLOO_LOG(log.log, log.level, PLAIT_LOG_WARN,
                   "refused %u connection(s) to plait's link listener that did not "
                   "belong to the job",
                   dialer.refused);
}

}  // namespace plait_gloo
