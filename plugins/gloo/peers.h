// Which rank an address in a gloo error message belongs to.
//
// gloo names the peer of a failed pair by the remote end of its socket
// ("Connection closed by peer [127.0.0.1]:41234"). With the TCP transport
// every rank listens on one socket for all its pairs, and of each pair one
// side connects to the other's listener:
//  - on the connecting side the message names the peer's listening address,
//    which every rank publishes during connectFullMesh (key "<rank>": the
//    addresses of its pairs, one per other rank in rank order, itself left
//    out);
//  - on the accepting side it names the peer's ephemeral address, which only
//    the peer knows. After connecting, every rank finds its own outgoing
//    connections (the sockets of this process whose remote end is another
//    rank's listener) and publishes their local addresses in one more
//    bootstrap round.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace plait_gloo {

// How gloo's messages may name one other rank.
struct Peer {
  // "ip:port" of its listening socket, for our own messages.
  std::string listening;
  // The same and its outgoing connections as gloo prints addresses:
  // "[ip]:port", where this gloo version prints the port in network byte
  // order (port 1 reads as 256).
  std::vector<std::string> gloo_names;
};

// Indexed by rank; empty for this rank and for ranks not known.
using PeerAddresses = std::vector<Peer>;

// Every rank's listening address, from the store's pairs.
PeerAddresses listen_addresses(
    const std::map<std::string, std::vector<char>> &pairs, int rank,
    int nranks);

// This rank's outgoing connections to the other ranks' listeners, encoded
// for the bootstrap ("<peer rank> <local address>\n" per connection).
std::vector<char> encode_outgoing(const PeerAddresses &listeners);

// Adds to peers what rank `from` published with encode_outgoing: the local
// address of its connection to `rank` names `from`.
void add_aliases(PeerAddresses &peers, int rank, int from,
                 const std::vector<char> &published);

// The rank whose address appears in text, or -1.
int find_peer_rank(const PeerAddresses &peers, const std::string &text);

// Listening address of rank r, or "" (for messages).
std::string listening_address(const PeerAddresses &peers, int r);

}  // namespace plait_gloo
