// plait's own TCP connection to every other rank, made before any gloo pair
// exists, so that no socket a stranger can reach is ever handed to gloo.
//
// Every rank listens on an ephemeral port of host_address and publishes that
// address with a fresh random 32-byte token over the core's bootstrap (the
// authenticated control plane). Of each two ranks the higher connects to the
// lower and first sends a hello naming its rank and presenting the lower
// rank's token. The listener serves every connection at once with poll():
// one that presents anything else, or nothing within a few seconds, is closed
// and the job goes on; a stranger can neither take a rank's place nor stop
// it from connecting. The listener is closed once every link is made.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "plait/transport.h"

namespace plait_gloo {

struct Links {
  std::vector<int> fd;  // by rank: a connected, authenticated socket; -1 for self
  Links() = default;
  Links(const Links &) = delete;
  Links &operator=(const Links &) = delete;
  ~Links();
};

struct LinkLog {
  plait_log_fn log;
  int level;
};

// An allgather of `bytes` from every rank over an authenticated channel
// (recv holds nranks * bytes, rank r's at r * bytes); throws Error on failure.
using Allgather = std::function<void(const void *send, size_t bytes, void *recv)>;

// The core's bootstrap as an Allgather (for init).
Allgather bootstrap_allgather(const plait_bootstrap_t *bootstrap);

// Makes links.fd for this rank of nranks (two allgathers: the addresses and
// tokens, then whether every rank made its links). Throws Error naming what
// failed. Blocks for at most about timeout_s (60 s when timeout_s <= 0).
void open_links(const Allgather &allgather, int rank, int nranks,
                const char *host_address, double timeout_s, const LinkLog &log,
                Links &links);

}  // namespace plait_gloo
