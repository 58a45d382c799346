#include "peers.h"

#include <cctype>

namespace plait_gloo {

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
