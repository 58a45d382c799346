// The plugin's state: one per successful init, passed back by the core as
// the `void *state` of every call. Only ever touched by the one thread the
// core calls the plugin from, so it holds no lock.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "peers.h"
#include "plait/transport.h"

namespace plait_gloo {

struct State {
  int rank = 0;
  int nranks = 1;
  double timeout_s = 0;

  // From the core (plait_transport_init_args_t).
  plait_log_fn log = nullptr;
  int log_level = PLAIT_LOG_OFF;
  plait_reduce_fn reduce = nullptr;
  plait_divide_fn divide = nullptr;

  // Where this rank's TCP sockets live (args->host_address): the gloo device
  // and plait's link listeners (links.h), also of contexts made later.
  std::string host_address;

  // NULL when nranks == 1: a job of one rank needs no network.
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;

  // Addresses by which gloo's messages may name each other rank (see
  // peers.h); maps an exception text back to the rank it names.
  PeerAddresses peer_addresses;

  // Every rank runs the same collectives in the same order, so this counter
  // gives every operation the same tag on every rank and consecutive
  // operations different ones.
  uint32_t next_tag = 0;
  uint32_t tag() { return next_tag++; }

  // After a failure inside a gloo collective the ranks may be out of step:
  // every later call fails fast with this code and message.
  plait_result_t broken = PLAIT_SUCCESS;
  std::string broken_message;

  std::string last_error;  // message of the last failure on this state
};

}  // namespace plait_gloo
