// A gloo context whose pairs run on the sockets plait connected itself
// (links.h) instead of on connections gloo accepted from whoever came first.
//
// This gloo version (Debian's 2022-05-18 snapshot) gives every pair its own
// listening socket and takes the first connection that reaches it, with no
// check of who connected: a local process that races the real peer takes its
// place, or leaves bytes in the pair's receive state that gloo later reads as
// the real peer's (the pair then waits forever for messages that never come).
// gloo cannot be handed a connected socket, so for each peer the plugin:
//  1. holds gloo's event-loop thread still (loop_pause.h), creates the pair
//     (gloo opens its listener) and, before the loop can accept anything,
//     accepts and closes (logged) whatever already connected to it and puts
//     an inert descriptor in the listener's place: gloo never accepts;
//  2. tells the pair to connect to a handover listener of this process (same
//     address) whose port sorts below the pair's, so gloo takes the
//     connecting side and connects there;
//  3. finds gloo's connected socket (the one whose peer is the handover
//     address) and puts plait's authenticated link in its place with dup2(),
//     then registers the descriptor again with gloo's event loop;
//  4. closes the handover listener (what reached it is discarded).
// If anything does not look as expected (gloo's listener not found, connect()
// failing, not exactly one socket connected to the handover address), the
// pair is made again, a few times at most.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <memory>

#include "links.h"
#include "peers.h"

struct sockaddr_storage;

namespace plait_gloo {

struct HandoverOptions {
  LinkLog log{nullptr, PLAIT_LOG_OFF};  // refused strangers (debug), their count (warn)
  // Tests only (nullptr otherwise): called for each new pair with the address
  // gloo's listener for it is bound to, while the listener is still open.
  void (*pair_listening)(void *arg, int rank, const struct sockaddr_storage &addr) = nullptr;
  void *pair_listening_arg = nullptr;
};

class LinkedContext : public ::gloo::Context {
 public:
  LinkedContext(int rank, int size) : ::gloo::Context(rank, size) {}

  // Makes every pair on links.fd (which it takes: the entries become -1) and
  // records in peers how gloo's messages will name each rank. Throws.
  void connect(const std::shared_ptr<::gloo::transport::Device> &device,
               Links &links, PeerAddresses &peers, const HandoverOptions &options);
};

}  // namespace plait_gloo
