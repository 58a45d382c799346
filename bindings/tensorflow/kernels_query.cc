// plait's TensorFlow op library: PlaitQuery, Horovod's rank_op, size_op,
// local_rank_op, ... read when the op runs rather than when the graph is built.
#include <string>

#include "common.h"

namespace plait_tf {
namespace {

class QueryOp : public tensorflow::OpKernel {
 public:
  explicit QueryOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string q;
    OP_REQUIRES_OK(c, c->GetAttr("query", &q));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_));
    if (q == "rank") fn_ = plait_rank;
    else if (q == "size") fn_ = plait_size;
    else if (q == "local_rank") fn_ = plait_local_rank;
    else if (q == "local_size") fn_ = plait_local_size;
    else if (q == "cross_rank") fn_ = plait_cross_rank;
    else if (q == "cross_size") fn_ = plait_cross_size;
    else if (q == "process_set_included") included_ = true;
    else
      OP_REQUIRES(c, false,
                  absl::InvalidArgumentError(
                      "plait: PLAIT_ERR_INVALID_ARGUMENT: PlaitQuery: unknown query '" + q +
                      "' (rank, size, local_rank, local_size, cross_rank, cross_size, "
                      "process_set_included)"));
    // Horovod's size_op and process_set_included_op take a set; the others
    // are the job's.
    OP_REQUIRES(c, included_ || set_ == 0 || q == "size",
                absl::InvalidArgumentError("plait: PLAIT_ERR_INVALID_ARGUMENT: PlaitQuery '" + q +
                                           "' has no process set (process_set_id " +
                                           std::to_string(set_) + ")"));
    OP_REQUIRES(c, set_ >= 0 && set_ <= INT32_MAX,
                absl::InvalidArgumentError("plait: PLAIT_ERR_INVALID_ARGUMENT: process_set_id " +
                                           std::to_string(set_) + " is not a process set id"));
  }

  void Compute(OpKernelContext* ctx) override {
    int value = 0;
    if (included_) {
      // Horovod: 1 when this rank is in the set, else 0 (an unknown set: an error).
      int r = -1;
      plait_result_t rc = plait_process_set_rank((int32_t)set_, &r);
      OP_REQUIRES_OK(ctx, FromPlait(rc, plait_last_error()));
      value = r >= 0 ? 1 : 0;
    } else if (set_ != 0) {
      plait_result_t rc = plait_process_set_size((int32_t)set_, &value);
      OP_REQUIRES_OK(ctx, FromPlait(rc, plait_last_error()));
    } else {
      plait_result_t rc = fn_(&value);
      OP_REQUIRES_OK(ctx, FromPlait(rc, plait_last_error()));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<int32_t>()() = value;
  }

 private:
  plait_result_t (*fn_)(int*) = nullptr;
  int64_t set_ = 0;
  bool included_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("PlaitQuery").Device(tensorflow::DEVICE_CPU), QueryOp);

}  // namespace plait_tf
