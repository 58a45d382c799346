// A gloo context whose pairs run on the sockets plait connected itself
// (links.h) instead of on connections gloo accepted from whoever came first.
//
// This gloo version (Debian's 2022-05-18 snapshot) gives every pair its own
// listening socket and takes the first connection that reaches it, with no
// check of who connected: a local process that races the real peer takes its
// place or feeds gloo's event loop bytes it aborts on. gloo cannot be handed
// a connected socket, so for each peer the plugin:
//  1. creates the pair (gloo opens its listener) and at once tells it to
//     connect to a handover listener of this process (same address) whose port
//     sorts below the pair's, so gloo takes the connecting side and closes its
//     own listener without ever accepting;
//  2. finds gloo's connected socket (the one whose peer is the handover
//     address) and puts plait's authenticated link in its place with dup2(),
//     then registers the descriptor again with gloo's event loop;
//  3. closes the handover listener (what reached it is discarded).
// A stranger can reach gloo's own listener only in the microseconds between
// steps 1's listen() and connect(); if gloo took such a connection, connect()
// fails or the socket found in step 2 is not the expected one, and the pair
// is made again.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <memory>

#include "links.h"
#include "peers.h"

namespace plait_gloo {

class LinkedContext : public ::gloo::Context {
 public:
  LinkedContext(int rank, int size) : ::gloo::Context(rank, size) {}

  // Makes every pair on links.fd (which it takes: the entries become -1) and
  // records in peers how gloo's messages will name each rank. Throws.
  void connect(const std::shared_ptr<::gloo::transport::Device> &device,
               Links &links, PeerAddresses &peers);
};

}  // namespace plait_gloo
