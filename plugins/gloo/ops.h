// The plugin's operations, as plain C++ on a State. They throw (Error for
// what the plugin detects itself, gloo's exceptions for the rest); the entry
// points in plugin.cc catch everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plait/transport.h"
#include "state.h"

namespace plait_gloo {

// setup.cc. On failure start() throws and, once the addresses are known,
// fills peers so that the caller can name a lost rank.
State *start(const plait_transport_init_args_t *args, PeerAddresses &peers);
void stop(State *s) noexcept;

// collectives.cc
void allreduce(State &s, void *buf, size_t count, plait_dtype_t dtype,
               plait_op_t op);
void allgatherv(State &s, void *buf, const size_t *bytes);
void broadcast(State &s, void *buf, size_t bytes, int root);
void alltoallv(State &s, const void *send, const size_t *send_bytes, void *recv,
               const size_t *recv_bytes);
void barrier(State &s);

// Checks shared by the reductions: dtype and op known, no AVERAGE on bool.
void check_reduction(const char *what, plait_dtype_t dtype, plait_op_t op);
// gloo::alltoallv of bytes; the arguments are already checked.
void gloo_alltoallv_bytes(State &s, const void *send,
                          const std::vector<int64_t> &send_bytes, void *recv,
                          const std::vector<int64_t> &recv_bytes);

// reducescatter.cc
void reducescatter(State &s, const void *send, void *recv, const size_t *counts,
                   plait_dtype_t dtype, plait_op_t op);

// memory.cc
void mem_alloc(size_t bytes, void **ptr);
void mem_free(void *ptr);
void mem_copy(void *dst, const void *src, size_t bytes, plait_copy_kind_t kind);

}  // namespace plait_gloo
