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
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "errors.h"

namespace plait_gloo {

namespace tcp = ::gloo::transport::tcp;

namespace {

constexpr int kTries = 4;          // pairs made again after a stranger's connection
constexpr int kPortAttempts = 64;  // handover listeners tried per pair

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
        raw_port(out) < raw_port(pair) && listen(fd, 1) == 0)
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

// One attempt at the pair for `rank`; false when a stranger's connection got
// in the way (the pair is then made again).
bool try_pair(::gloo::transport::Context &ctx, tcp::Device &dev, int rank, int link, Peer &peer) {
  auto &pair = ctx.createPair(rank);
  // tcp/pair.h cannot be included (it needs a header Debian does not ship),
  // so the pair's event handler is reached by a cross-cast: a TCP pair is
  // both a transport::Pair and a tcp::Handler.
  auto *handler = dynamic_cast<tcp::Handler *>(pair.get());
  if (handler == nullptr)
    fail(PLAIT_ERR_INTERNAL, "init: gloo made a pair that is not a TCP pair");
  struct sockaddr_storage self =
      static_cast<const tcp::Address &>(pair->address()).getSockaddr();
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
    return false;  // gloo had accepted a stranger on its listener meanwhile
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
                            Links &links, PeerAddresses &peers) {
  auto *dev = dynamic_cast<tcp::Device *>(device.get());
  if (dev == nullptr) fail(PLAIT_ERR_INTERNAL, "init: the gloo device is not a TCP device");
  auto transport = device->createContext(rank, size);
  transport->setTimeout(getTimeout());
  for (int r = 0; r < size; r++) {
    if (r == rank) continue;
    int tries = 0;
    while (!try_pair(*transport, *dev, r, links.fd[(size_t)r], peers[(size_t)r]))
      if (++tries == kTries)
        fail(PLAIT_ERR_TRANSPORT,
             "init: could not set up gloo's pair with rank %d in %d tries: another "
             "process kept connecting to gloo's listening sockets",
             r, kTries);
    close(links.fd[(size_t)r]);  // gloo's descriptor holds the socket now
    links.fd[(size_t)r] = -1;
  }
  device_ = device;
  transportContext_ = std::move(transport);
}

}  // namespace plait_gloo
