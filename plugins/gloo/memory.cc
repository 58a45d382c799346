// Host memory for the core's fusion buffers: 64-byte aligned (a cache line,
// and enough for any vector unit the reduction kernels use).
#include <cstdlib>
#include <cstring>

#include "errors.h"
#include "ops.h"

namespace plait_gloo {

static const size_t kAlignment = 64;

void mem_alloc(size_t bytes, void **ptr) {
  PLAIT_GLOO_REQUIRE(ptr != nullptr, "mem_alloc: ptr is NULL");
  void *p = nullptr;
  // A request for 0 bytes still returns a distinct pointer to free later.
  int rc = posix_memalign(&p, kAlignment, bytes > 0 ? bytes : kAlignment);
  if (rc != 0 || p == nullptr)
    fail(PLAIT_ERR_NO_MEMORY, "mem_alloc: cannot allocate %zu bytes (%s)",
         bytes, std::strerror(rc));
  *ptr = p;
}

void mem_free(void *ptr) { std::free(ptr); }

void mem_copy(void *dst, const void *src, size_t bytes,
              plait_copy_kind_t kind) {
  if (kind != PLAIT_COPY_HOST_TO_HOST)
    fail(PLAIT_ERR_UNSUPPORTED,
         "mem_copy: copy kind %d needs device memory; the gloo transport has "
         "host memory only (PLAIT_COPY_HOST_TO_HOST)",
         (int)kind);
  PLAIT_GLOO_REQUIRE(bytes == 0 || (dst != nullptr && src != nullptr),
                     "mem_copy: %s is NULL but bytes is %zu",
                     dst == nullptr ? "dst" : "src", bytes);
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace plait_gloo
