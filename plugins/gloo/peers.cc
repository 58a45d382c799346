#include "peers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gloo/transport/tcp/address.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace plait_gloo {

// Address::str() is "[ip]:port", followed by "$seq" for a pair's address.
static std::string without_sequence(const std::string &s) {
  size_t dollar = s.find('$');
  return dollar == std::string::npos ? s : s.substr(0, dollar);
}

// "ip:port" (IPv6: "[ip]:port") with the port in host byte order.
static std::string display(const struct sockaddr_storage &ss) {
  char ip[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    const auto *in = (const struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    port = ntohs(in->sin_port);
    return std::string(ip) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto *in6 = (const struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    port = ntohs(in6->sin6_port);
  }
  return "[" + std::string(ip) + "]:" + std::to_string(port);
}

PeerAddresses listen_addresses(
    const std::map<std::string, std::vector<char>> &pairs, int rank,
    int nranks) {
  PeerAddresses out((size_t)nranks);
  if (nranks < 2) return out;
  for (int r = 0; r < nranks; r++) {
    if (r == rank) continue;
    auto it = pairs.find(std::to_string(r));
    if (it == pairs.end()) continue;
    const std::vector<char> &all = it->second;
    size_t each = all.size() / (size_t)(nranks - 1);
    if (each == 0 || each * (size_t)(nranks - 1) != all.size()) continue;
    // Rank r lists one address per other rank; ours is at our index among
    // them (r itself is left out).
    size_t index = (size_t)(rank > r ? rank - 1 : rank);
    std::vector<char> bytes(all.begin() + (long)(index * each),
                            all.begin() + (long)((index + 1) * each));
    try {
      gloo::transport::tcp::Address address(bytes);
      out[(size_t)r].listening = display(address.getSockaddr());
      out[(size_t)r].gloo_names.push_back(without_sequence(address.str()));
    } catch (...) {
      // Unreadable: the rank stays unnamed in messages.
    }
  }
  return out;
}

// "[ip]:port" of one end of a TCP socket, or "" when fd is none.
static std::string socket_address(int fd, bool peer) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
                : getsockname(fd, (struct sockaddr *)&ss, &len);
  if (rc != 0 || (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
    return "";
  return without_sequence(
      gloo::transport::tcp::Address((const struct sockaddr *)&ss, len).str());
}

std::vector<char> encode_outgoing(const PeerAddresses &listeners) {
  std::ostringstream out;
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) return {};
  while (struct dirent *e = readdir(dir)) {
    char *end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM)
      continue;
    std::string remote = socket_address((int)fd, true);
    if (remote.empty()) continue;
    for (size_t r = 0; r < listeners.size(); r++)
      for (const std::string &a : listeners[r].gloo_names)
        if (a == remote)
          out << r << ' ' << socket_address((int)fd, false) << '\n';
  }
  closedir(dir);
  std::string s = out.str();
  return std::vector<char>(s.begin(), s.end());
}

void add_aliases(PeerAddresses &peers, int rank, int from,
                 const std::vector<char> &published) {
  std::istringstream in(std::string(published.begin(), published.end()));
  int to;
  std::string address;
  while (in >> to >> address)
    if (to == rank && !address.empty() && from >= 0 &&
        (size_t)from < peers.size())
      peers[(size_t)from].gloo_names.push_back(address);
}

int find_peer_rank(const PeerAddresses &peers, const std::string &text) {
  for (size_t r = 0; r < peers.size(); r++) {
    for (const std::string &a : peers[r].gloo_names) {
      for (size_t at = text.find(a); at != std::string::npos;
           at = text.find(a, at + 1)) {
        size_t end = at + a.size();
        // "...:4123" must not match "...:41234".
        if (end >= text.size() || !std::isdigit((unsigned char)text[end]))
          return (int)r;
      }
    }
  }
  return -1;
}

std::string listening_address(const PeerAddresses &peers, int r) {
  if (r < 0 || (size_t)r >= peers.size()) return "";
  return peers[(size_t)r].listening;
}

}  // namespace plait_gloo
