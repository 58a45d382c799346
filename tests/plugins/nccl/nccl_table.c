/*
 * The nccl plugin's table and its refusals, at the plugin ABI (no core),
 * runnable anywhere: what the table declares (device memory only, every
 * collective, no 16-bit integer reductions, every entry of the device
 * path), init's refusal of bad arguments with messages, NULL states (the
 * device path's entries included: device() is -1, the others refuse naming
 * the entry, notify never calls done), and, without a GPU, a 3-rank init
 * over the harness's bootstrap that fails on every rank naming rank 0, the
 * other two, and CUDA's text (the ranks tell each other before making a
 * communicator, so none waits for the others).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nccl_ranks.h"
#include "plait/dtypes.h"
#include "../../harness/transport_calls.h"

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

static void table(const plait_transport_t *t) {
  CHECK(t->abi_version == PLAIT_TRANSPORT_ABI_VERSION, "abi_version %u", t->abi_version);
  CHECK(t->struct_size == sizeof *t, "struct_size %u", t->struct_size);
  CHECK(!strcmp(t->name, "nccl"), "name %s", t->name);
  CHECK((t->caps & PLAIT_CAP_DEVICE_MEMORY) && !(t->caps & PLAIT_CAP_HOST_MEMORY),
        "caps 0x%llx: device memory only", (unsigned long long)t->caps);
  uint64_t colls = PLAIT_CAP_ALLREDUCE | PLAIT_CAP_ALLGATHERV | PLAIT_CAP_BROADCAST |
                   PLAIT_CAP_ALLTOALLV | PLAIT_CAP_REDUCESCATTER | PLAIT_CAP_BARRIER;
  CHECK((t->caps & colls) == colls, "caps 0x%llx lack a collective", (unsigned long long)t->caps);
  for (int d = 0; d < PLAIT_DTYPE_COUNT_; d++) {
    int want = d != PLAIT_INT16 && d != PLAIT_UINT16;
    CHECK(!!(t->dtypes & PLAIT_DTYPE_BIT(d)) == want, "dtypes mask: %s %s",
          plait_dtype_name_inline((plait_dtype_t)d), want ? "missing" : "present");
  }
  CHECK(t->ops == PLAIT_OP_MASK_ALL, "ops 0x%x", t->ops);
  CHECK(PLAIT_TRANSPORT_HAS(t, algorithm) && PLAIT_TRANSPORT_HAS(t, subset),
        "algorithm and subset are set");
  /* The device-memory path (transport.h): every entry of it. */
  CHECK(tc_scaled(t), "allreduce_flags has PLAIT_ALLREDUCE_SCALED");
  CHECK(!tc_spans(t), "allreduce_flags has no PLAIT_ALLREDUCE_SPANS (device memory)");
  CHECK(t->auto_place == 0, "auto_place is 0 (never chosen by auto)");
  CHECK(PLAIT_TRANSPORT_HAS(t, device), "device is set");
  CHECK(PLAIT_TRANSPORT_HAS(t, batch_copy), "batch_copy is set");
  CHECK(PLAIT_TRANSPORT_HAS(t, ready), "ready is set");
  CHECK(PLAIT_TRANSPORT_HAS(t, notify), "notify is set");
  CHECK(PLAIT_TRANSPORT_HAS(t, interrupt), "interrupt is set");
}

static void never_called(void *ctx, plait_result_t rc, const char *msg) {
  (void)rc, (void)msg;
  ++*(int *)ctx;
}

/* The device path's entries on a NULL state: a refusal naming it, no crash. */
static void null_device_entries(const plait_transport_t *t) {
  if (!PLAIT_TRANSPORT_HAS(t, interrupt)) return;
  const char *want = "state is NULL";
  CHECK(t->device(NULL) == -1, "device(NULL) is %d, want -1", t->device(NULL));
  plait_span_t span = {NULL, NULL, 0};
  plait_result_t rc = t->batch_copy(NULL, &span, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), want) &&
            strstr(t->last_error(NULL), "batch_copy"),
        "batch_copy(NULL state): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  rc = t->ready(NULL, NULL);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "ready: state is NULL"),
        "ready(NULL state): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  int calls = 0;
  rc = t->notify(NULL, never_called, &calls);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "notify: state is NULL"),
        "notify(NULL state): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  CHECK(calls == 0, "a refused notify called done %d time(s)", calls);
  rc = t->interrupt(NULL, PLAIT_ERR_PEER_LOST, "rank 1 lost");
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "interrupt: state is NULL"),
        "interrupt(NULL state): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  rc = tc_allreduce_scaled(t, NULL, NULL, NULL, 0, PLAIT_FLOAT32, PLAIT_OP_SUM, 0.5);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "allreduce") &&
            strstr(t->last_error(NULL), want),
        "allreduce(NULL state, postscale 0.5): %s: %s", plait_result_name_inline(rc),
        t->last_error(NULL));
}

static void refusals(const plait_transport_t *t) {
  void *state = NULL;
  plait_result_t rc = t->init(NULL, &state);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "args is NULL"),
        "init(NULL): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  plait_transport_init_args_t a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.nranks = 1;
  rc = t->init(&a, NULL);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "state is NULL"),
        "init(args, NULL): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  rc = t->init(&a, &state);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "bootstrap is NULL"),
        "init without a bootstrap: %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  a.size = 16;
  rc = t->init(&a, &state);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "at least"),
        "init with a 16-byte args: %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  CHECK(state == NULL, "a failed init set *state");
  rc = tc_allreduce(t, NULL, NULL, 0, PLAIT_FLOAT32, PLAIT_OP_SUM);
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(NULL), "state is NULL"),
        "allreduce(NULL state): %s: %s", plait_result_name_inline(rc), t->last_error(NULL));
  CHECK(t->finalize(NULL) == PLAIT_SUCCESS, "finalize(NULL)");
  CHECK(t->algorithm(NULL, PLAIT_CAP_ALLREDUCE, 8) == NULL, "algorithm(NULL state)");
}

/* Each rank of 3, without a GPU: everyone is named, nobody waits. */
static int init_fails(int rank, int nranks, plait_result_t rc, const char *msg) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  const char *cuda = e != cudaSuccess ? cudaGetErrorString(e) : "found none";
  char who[64];
  snprintf(who, sizeof who, "rank 0 (and %d more of the %d ranks)", nranks - 1, nranks);
  int ok = rc == PLAIT_ERR_UNSUPPORTED && strstr(msg, who) && strstr(msg, cuda) &&
           (rank == 0) == !strstr(msg, "(reported by that rank)");
  if (!ok) nt_say(rank, "FAILED: want PLAIT_ERR_UNSUPPORTED naming %s and '%s', got %s: %s", who,
                  cuda, plait_result_name_inline(rc), msg);
  return !ok;
}

int main(void) {
  void *dl = dlopen(PLAIT_NCCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    printf("FAILED: dlopen %s: %s\n", PLAIT_NCCL_PLUGIN, dlerror());
    return 1;
  }
  const plait_transport_t *t = dlsym(dl, PLAIT_TRANSPORT_SYMBOL);
  CHECK(t != NULL, "%s exports no %s", PLAIT_NCCL_PLUGIN, PLAIT_TRANSPORT_SYMBOL);
  if (t) {
    table(t);
    refusals(t);
    null_device_entries(t);
  }
  char why[256];
  if (nt_device_count(why, sizeof why) > 0) {
    printf("a GPU is here: the 3-rank refusal without a GPU does not apply\n");
  } else {
    CHECK(nt_run_failing_init(3, 120, init_fails) == 0,
          "3 ranks without a GPU: not every rank failed as it should (above)");
  }
  printf("%d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}
