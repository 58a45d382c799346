#include "handover.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>
#include <gloo/transport/pair.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "errors.h"
#include "log.h"
#include "loop_pause.h"

namespace plait_gloo {

namespace tcp = ::gloo::transport::tcp;

namespace {

constexpr int kTries = 4;          // pairs made again when something looks wrong
constexpr int kPortAttempts = 64;  // handover listeners tried per pair
constexpr double kPauseS = 30;     // for gloo's event loop to answer (a loaded host)

// The port as stored (network order), which is how gloo compares two
// addresses to choose the connecting side.
uint16_t raw_port(const struct sockaddr_storage &ss) {
  return ss.ss_family == AF_INET ? ((const struct sockaddr_in &)ss).sin_port
                                 : ((const struct sockaddr_in6 &)ss).sin6_port;
}

socklen_t sockaddr_len(const struct sockaddr_storage &ss) {
  return ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                 : sizeof(struct sockaddr_in6);
}

bool same_address(const struct sockaddr_storage &a, const struct sockaddr_storage &b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    auto &x = (const struct sockaddr_in &)a;
    auto &y = (const struct sockaddr_in &)b;
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  auto &x = (const struct sockaddr_in6 &)a;
  auto &y = (const struct sockaddr_in6 &)b;
  return x.sin6_port == y.sin6_port &&
         std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
}

// A listener on the pair's own IP whose port gloo sorts below the pair's, so
// that gloo's side of the pair is the connecting one; -1 if none was found.
int handover_listener(const struct sockaddr_storage &pair, struct sockaddr_storage &out) {
  for (int i = 0; i < kPortAttempts; i++) {
    out = pair;
    if (out.ss_family == AF_INET)
      ((struct sockaddr_in &)out).sin_port = 0;
    else
      ((struct sockaddr_in6 &)out).sin6_port = 0;
    int fd = socket(out.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    socklen_t len = sockaddr_len(out);
    if (bind(fd, (struct sockaddr *)&out, len) == 0 &&
        getsockname(fd, (struct sockaddr *)&out, &len) == 0 &&
        raw_port(out) < raw_port(pair) && listen(fd, 16) == 0)
      return fd;
    close(fd);
  }
  return -1;
}

// The descriptor of this process's socket connected to `to`, or -1 (also when
// there are several).
int socket_connected_to(const struct sockaddr_storage &to) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1, count = 0;
  while (struct dirent *e = readdir(dir)) {
    char *end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername((int)fd, (struct sockaddr *)&ss, &len) == 0 && same_address(ss, to)) {
      found = (int)fd;
      count++;
    }
  }
  closedir(dir);
  return count == 1 ? found : -1;
}

std::string gloo_name(const struct sockaddr_storage &ss) {
  std::string s = tcp::Address((const struct sockaddr *)&ss, sockaddr_len(ss)).str();
  size_t dollar = s.find('$');
  return dollar == std::string::npos ? s : s.substr(0, dollar);
}

std::string display(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return "?";
  if (ss.ss_family == AF_INET) {
    auto &in = (const struct sockaddr_in &)ss;
    inet_ntop(AF_INET, &in.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(in.sin_port));
  }
  auto &in6 = (const struct sockaddr_in6 &)ss;
  inet_ntop(AF_INET6, &in6.sin6_addr, ip, sizeof ip);
  return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6.sin6_port));
}

// gloo's listening socket for a new pair: the one socket of this process
// listening on `addr`, or -1. `accepted` tells whether a socket of this
// process is connected from that address (gloo took a connection there).
int gloo_listener(const struct sockaddr_storage &addr, bool &accepted) {
  accepted = false;
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1, count = 0;
  while (struct dirent *e = readdir(dir)) {
    char *end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname((int)fd, (struct sockaddr *)&ss, &len) != 0 || !same_address(ss, addr))
      continue;
    int listening = 0;
    len = sizeof listening;
    if (getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening) {
      found = (int)fd;
      count++;
    } else {
      accepted = true;
    }
  }
  closedir(dir);
  return count == 1 ? found : -1;
}

std::string sockaddr_text(const struct sockaddr_storage &ss) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto &in = (const struct sockaddr_in &)ss;
    inet_ntop(AF_INET, &in.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (ss.ss_family != AF_INET6) return "?";
  auto &in6 = (const struct sockaddr_in6 &)ss;
  inet_ntop(AF_INET6, &in6.sin6_addr, ip, sizeof ip);
  return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6.sin6_port));
}

// Takes gloo's listener `fd` away from gloo while its event loop is paused:
// whatever already connected is accepted and closed (logged, counted in
// refused), and an eventfd that never becomes readable takes the listener's
// place, registered with the pair's handler as the listener was, so that
// gloo's connect() unregisters and closes it as it would the listener.
// Connections still on their way get a reset when the listener closes.
void disarm_listener(tcp::Device &dev, tcp::Handler *handler, int fd, int rank,
                     const HandoverOptions &opt, unsigned &refused) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0) {
    for (;;) {
      struct sockaddr_storage from;
      socklen_t len = sizeof from;
      int c = accept4(fd, (struct sockaddr *)&from, &len, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        break;  // EAGAIN: nothing more waiting
      }
      refused++;
      PLAIT_GLOO_LOG(opt.log.log, opt.log.level, PLAIT_LOG_DEBUG,
                     "refused a connection to gloo's listening socket for rank %d from "
                     "%s: gloo's traffic runs only on plait's own links",
                     rank, sockaddr_text(from).c_str());
      close(c);
    }
  }
  int inert = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (inert < 0 || dup2(inert, fd) < 0) {
    int e = errno;
    if (inert >= 0) close(inert);
    fail(PLAIT_ERR_SYSTEM, "init: cannot close gloo's listening socket for rank %d: %s", rank,
         std::strerror(e));
  }
  close(inert);
  // dup2 closed the listener, which removed it from gloo's epoll set.
  dev.registerDescriptor(fd, EPOLLIN, handler);
}

// One attempt at the pair for `rank`; false when something did not look as
// expected (the pair is then made again).
bool try_pair(::gloo::transport::Context &ctx, tcp::Device &dev, int rank, int link, Peer &peer,
              const HandoverOptions &opt, unsigned &refused) {
  // A previous attempt's pair: its destructor waits for a loop tick, so it
  // goes before the loop is paused.
  ctx.getPair(rank).reset();
  LoopPause pause(dev, kPauseS);
  auto &pair = ctx.createPair(rank);
  // tcp/pair.h cannot be included (it needs a header Debian does not ship),
  // so the pair's event handler is reached by a cross-cast: a TCP pair is
  // both a transport::Pair and a tcp::Handler.
  auto *handler = dynamic_cast<tcp::Handler *>(pair.get());
  if (handler == nullptr)
    fail(PLAIT_ERR_INTERNAL, "init: gloo made a pair that is not a TCP pair");
  struct sockaddr_storage self =
      static_cast<const tcp::Address &>(pair->address()).getSockaddr();
  if (opt.pair_listening != nullptr) opt.pair_listening(opt.pair_listening_arg, rank, self);
  bool accepted = false;
  int listener = gloo_listener(self, accepted);
  if (listener < 0 || accepted) return false;  // not as expected: make another
  disarm_listener(dev, handler, listener, rank, opt, refused);
  pause.release();
  struct sockaddr_storage hand;
  int h = handover_listener(self, hand);
  if (h < 0) return false;  // a pair whose port sorts too low: make another
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{h};
  try {
    pair->connect(tcp::Address((const struct sockaddr *)&hand, sockaddr_len(hand)).bytes());
  } catch (const std::exception &) {
    return false;
  }
  int g = socket_connected_to(hand);
  if (g < 0) return false;
  int one = 1;
  int flags = fcntl(link, F_GETFL);
  if (flags < 0 || fcntl(link, F_SETFL, flags | O_NONBLOCK) != 0 ||
      setsockopt(link, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
      dup2(link, g) < 0)
    fail(PLAIT_ERR_SYSTEM, "init: cannot hand plait's link to rank %d to gloo: %s", rank,
         std::strerror(errno));
  // dup2 closed gloo's socket, which removed it from gloo's epoll set.
  dev.registerDescriptor(g, EPOLLIN, handler);
  peer.listening = display(g);
  peer.gloo_names.assign(1, gloo_name(hand));
  return true;
}

}  // namespace

void LinkedContext::connect(const std::shared_ptr<::gloo::transport::Device> &device,
                            Links &links, PeerAddresses &peers, const HandoverOptions &opt) {
  auto *dev = dynamic_cast<tcp::Device *>(device.get());
  if (dev == nullptr) fail(PLAIT_ERR_INTERNAL, "init: the gloo device is not a TCP device");
  auto transport = device->createContext(rank, size);
  transport->setTimeout(getTimeout());
  unsigned refused = 0;
  for (int r = 0; r < size; r++) {
    if (r == rank) continue;
    int tries = 0;
    while (!try_pair(*transport, *dev, r, links.fd[(size_t)r], peers[(size_t)r], opt, refused))
      if (++tries == kTries)
        fail(PLAIT_ERR_TRANSPORT,
             "init: could not set up gloo's pair with rank %d in %d tries (gloo's listening "
             "socket or its connection to the handover listener was not as expected)",
             r, kTries);
    close(links.fd[(size_t)r]);  // gloo's descriptor holds the socket now
    links.fd[(size_t)r] = -1;
  }
  if (refused)
    PLAIT_GLOO_LOG(opt.log.log, opt.log.level, PLAIT_LOG_WARN,
                   "refused %u connection(s) to gloo's listening sockets that did not belong "
                   "to the job",
                   refused);
  device_ = device;
  transportContext_ = std::move(transport);
}

}  // namespace plait_gloo
