// Which rank an address in a gloo error message belongs to.
//
// gloo names the peer of a failed pair by the remote address it recorded
// when the pair connected ("Connection closed by peer [127.0.0.1]:41234").
// The plugin connects every pair through a handover listener of its own
// process (handover.h), so that address is the handover listener's, one per
// peer; the plugin records it for each rank, with the remote address of the
// rank's link for its own messages.
#pragma once

#include <string>
#include <vector>

namespace plait_gloo {

// How gloo's messages may name one other rank.
struct Peer {
  // "ip:port" of the remote end of the link to it, for our own messages.
  std::string listening;
  // The addresses gloo's messages use for it, as gloo prints addresses:
  // "[ip]:port", where this gloo version prints the port in network byte
  // order (port 1 reads as 256).
  std::vector<std::string> gloo_names;
};

// Indexed by rank; empty for this rank and for ranks not known.
using PeerAddresses = std::vector<Peer>;

// The rank whose address appears in text, or -1.
int find_peer_rank(const PeerAddresses &peers, const std::string &text);

// The link address of rank r, or "" (for messages).
std::string listening_address(const PeerAddresses &peers, int r);

}  // namespace plait_gloo
