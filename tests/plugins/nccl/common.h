/* Small helpers shared by the nccl GPU test programs: CUDA checks and the
 * pass/fail tally of one rank. */
#ifndef PLAIT_NCCL_TEST_COMMON_H
#define PLAIT_NCCL_TEST_COMMON_H

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "nccl_ranks.h"
#include "plait/dtypes.h"

typedef struct tally {
  int rank;
  int checks, failed;
} tally_t;

/* Records one check; prints what failed. */
#define EXPECT(ty, cond, ...)                                                  \
  do {                                                                         \
    (ty)->checks++;                                                            \
    if (!(cond)) {                                                             \
      (ty)->failed++;                                                          \
      char expect_msg_[1024];                                                  \
      snprintf(expect_msg_, sizeof expect_msg_, __VA_ARGS__);                  \
      nt_say((ty)->rank, "FAILED %s:%d: %s", __FILE__, __LINE__, expect_msg_); \
    }                                                                          \
  } while (0)

/* A CUDA call the test itself needs: a failure fails the rank at once. */
#define CUDA_OR_FAIL(ty, call)                                                 \
  do {                                                                         \
    cudaError_t cuda_e_ = (call);                                              \
    if (cuda_e_ != cudaSuccess) {                                              \
      nt_say((ty)->rank, "FAILED %s:%d: %s: %s", __FILE__, __LINE__, #call,    \
             cudaGetErrorString(cuda_e_));                                     \
      (ty)->failed++;                                                          \
      return;                                                                  \
    }                                                                          \
  } while (0)

#endif
