/*
 * Without a GPU (the CPU machines, ci/test): PLAIT_TRANSPORT=nccl loads the
 * plugin and plait_init refuses cleanly through the public C API, with
 * PLAIT_ERR_UNSUPPORTED and a message naming the transport, the rank and
 * CUDA's own error (cudaGetDeviceCount's text as this process sees it): no
 * crash, no hang (alarm), nothing left initialised, and the same again on
 * a second try. Skips (77) where a GPU is present.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nccl_ranks.h"
#include "plait/dtypes.h"
#include "plait/plait.h"

static int checks, failed;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failed++;                                                                \
      printf("FAILED line %d: ", __LINE__);                                    \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

int main(void) {
  alarm(120); /* a hang ends the test (SIGALRM): it fails, never blocks ctest */
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) {
    printf("SKIP: %d CUDA device(s) here: the refusal without a GPU does not apply "
           "(the GPU tests run instead)\n", count);
    return NT_SKIP;
  }
  const char *want = e != cudaSuccess ? cudaGetErrorString(e) : "found none";
  printf("CUDA here: cudaGetDeviceCount -> %s (%s); expecting plait_init to say so\n",
         e != cudaSuccess ? cudaGetErrorName(e) : "0 devices", want);
  nt_api_env();
  for (int attempt = 1; attempt <= 2; attempt++) {
    plait_result_t rc = plait_init();
    const char *msg = plait_last_error();
    printf("attempt %d: plait_init -> %s: %s\n", attempt, plait_result_name_inline(rc), msg);
    CHECK(rc == PLAIT_ERR_UNSUPPORTED, "want PLAIT_ERR_UNSUPPORTED, got %s",
          plait_result_name_inline(rc));
    CHECK(strstr(msg, "nccl") != NULL, "the message does not name the transport");
    CHECK(strstr(msg, "rank 0") != NULL, "the message does not name the rank");
    CHECK(strstr(msg, "cudaGetDeviceCount") != NULL, "the message does not name the CUDA call");
    CHECK(strstr(msg, want) != NULL, "the message does not carry CUDA's text '%s'", want);
    int init = -1;
    CHECK(plait_is_initialized(&init) == PLAIT_SUCCESS && init == 0,
          "plait is initialised after a failed init (%d)", init);
    if (rc == PLAIT_SUCCESS) plait_shutdown();
  }
  printf("%d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}
