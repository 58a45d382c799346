/*
 * Where a tensor lives, checked at the API (api_ops.c): a transport that
 * takes device memory only refuses host tensors by name; a tensor on another
 * device than the transport's (its device() entry) is refused naming both;
 * what needs the transport's batch_copy (scale factors, AVERAGE, out of place, outputs
 * plait allocates) is refused naming the transport when it has none.
 * Single rank on tests/plugins/fixtures/devonly.c (device 1, no batch_copy); nothing
 * reaches the transport, so no device memory is needed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

static void devonly_env(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
  setenv("PLAIT_TRANSPORT", "devonly", 1);
}

TestSuite(api_device, .init = devonly_env, .timeout = 60);

#define INIT_OK()                                                              \
  do {                                                                         \
    plait_result_t init_rc_ = plait_init();                                    \
    cr_assert_eq(init_rc_, PLAIT_SUCCESS, "plait_init: %s: %s",                \
                 plait_result_name(init_rc_), plait_last_error());             \
  } while (0)

#define EXPECT_ERROR(call, code, ...)                                          \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    const char *msg_ = plait_last_error();                                     \
    cr_expect_eq(rc_, code, "%s: %s", plait_result_name(rc_), msg_);           \
    const char *want_[] = {__VA_ARGS__};                                       \
    for (size_t i_ = 0; i_ < sizeof want_ / sizeof *want_; i_++)              \
      cr_expect(strstr(msg_, want_[i_]), "'%s' not in \"%s\"", want_[i_], msg_); \
  } while (0)

static plait_tensor_t on(int device, void *data, size_t count) {
  plait_tensor_t t;
  plait_tensor_1d(&t, data, count, PLAIT_FLOAT32);
  t.device = device;
  return t;
}

Test(api_device, host_tensor_is_refused_on_a_device_only_transport) {
  INIT_OK();
  float x[4] = {0};
  plait_tensor_t t = on(PLAIT_DEVICE_HOST, x, 4);
  plait_handle_t *h = NULL;
  EXPECT_ERROR(plait_allreduce_async("x", &t, &t, PLAIT_OP_SUM, NULL, &h), PLAIT_ERR_UNSUPPORTED,
               "'x'", "host memory", "'devonly'", "device memory only");
  EXPECT_ERROR(plait_broadcast_async("b", &t, 0, NULL, &h), PLAIT_ERR_UNSUPPORTED, "'b'",
               "host memory");
  cr_expect(h == NULL, "no handle on error");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(api_device, tensor_on_another_device_is_refused_naming_both) {
  INIT_OK();
  static char fake_device_memory[64]; /* never touched: refused first */
  plait_tensor_t t = on(0, fake_device_memory, 4);
  plait_handle_t *h = NULL;
  EXPECT_ERROR(plait_allreduce_async("g", &t, &t, PLAIT_OP_SUM, NULL, &h),
               PLAIT_ERR_INVALID_ARGUMENT, "'g'", "device 0", "device 1", "'devonly'");
  plait_tensor_t out = on(1, fake_device_memory, 4);
  EXPECT_ERROR(plait_allreduce_async("g", &out, &t, PLAIT_OP_SUM, NULL, &h),
               PLAIT_ERR_INVALID_ARGUMENT, "output", "device 0", "device 1");
  cr_expect(h == NULL, "no handle on error");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(api_device, what_needs_batch_copy_is_refused_naming_the_transport) {
  INIT_OK();
  static char fake_device_memory[64];
  plait_tensor_t t = on(1, fake_device_memory, 4);
  plait_handle_t *h = NULL;
  EXPECT_ERROR(plait_allreduce_async("a", &t, &t, PLAIT_OP_AVERAGE, NULL, &h),
               PLAIT_ERR_UNSUPPORTED, "AVERAGE", "'devonly'", "batch_copy");
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.postscale_factor = 0.5;
  EXPECT_ERROR(plait_allreduce_async("a", &t, &t, PLAIT_OP_SUM, &o, &h), PLAIT_ERR_UNSUPPORTED,
               "scale factor", "'devonly'");
  static char other[64];
  plait_tensor_t t2 = on(1, other, 4);
  EXPECT_ERROR(plait_allreduce_async("a", &t, &t2, PLAIT_OP_SUM, NULL, &h), PLAIT_ERR_UNSUPPORTED,
               "out of place", "'devonly'", "batch_copy");
  EXPECT_ERROR(plait_allgather_async("a", &t, NULL, &h), PLAIT_ERR_UNSUPPORTED, "'devonly'",
               "batch_copy");
  EXPECT_ERROR(plait_reducescatter_async("a", &t, PLAIT_OP_SUM, NULL, &h), PLAIT_ERR_UNSUPPORTED,
               "'devonly'", "batch_copy");
  EXPECT_ERROR(plait_alltoall_async("a", &t, NULL, NULL, &h), PLAIT_ERR_UNSUPPORTED, "'devonly'",
               "batch_copy");
  cr_expect(h == NULL, "no handle on error");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}
