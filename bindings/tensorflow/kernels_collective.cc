// plait's TensorFlow op library: the kernels of the collectives. Each is an
// AsyncOpKernel that describes its tensors, submits to plait and returns;
// common.cc finishes it on TensorFlow's worker pool.
//
// Outputs are TensorFlow's tensors (TensorFlow's allocator, 64-byte aligned).
// allreduce and broadcast write into their output directly (forwarding the
// input's buffer when TensorFlow allows). allgather, alltoall and
// reducescatter learn their output's size only when plait has negotiated, so
// plait fills its own output buffer and the kernel copies it into a
// TensorFlow tensor allocated then (one memcpy of the output).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace plait_tf {

using tensorflow::OpInputList;
using tensorflow::OpOutputList;

namespace {

// Attributes every collective has.
struct Naming {
  std::string name;
  int32_t set = 0;  // the process set (plait matches names within it)
  absl::Status Read(OpKernelConstruction* c) {
    std::string tensor_name;
    bool ignore = false;
    TF_RETURN_IF_ERROR(c->GetAttr("tensor_name", &tensor_name));
    TF_RETURN_IF_ERROR(c->GetAttr("ignore_name_scope", &ignore));
    TF_RETURN_IF_ERROR(ReadProcessSet(c, &set));
    name = OperationName(tensor_name, c->def().name(), ignore);
    // plait takes names as C strings: one with a NUL would be cut there and
    // could collide with another ("a\0rank0" and "a\0rank1" both "a").
    if (name.find('\0') != std::string::npos)
      return absl::InvalidArgumentError(
          "plait: PLAIT_ERR_INVALID_ARGUMENT: tensor name '" + name.substr(0, name.find('\0')) +
          "\\0...' contains a NUL character, which the C library cannot carry; remove it");
    return absl::OkStatus();
  }
};

// reduce_op and the scale factors.
struct Scaling {
  plait_op_t op = PLAIT_OP_SUM;
  float pre = 1.0f, post = 1.0f;
  absl::Status Read(OpKernelConstruction* c) {
    int hvd = 0;
    TF_RETURN_IF_ERROR(c->GetAttr("reduce_op", &hvd));
    TF_RETURN_IF_ERROR(PlaitOp(hvd, &op));
    TF_RETURN_IF_ERROR(c->GetAttr("prescale_factor", &pre));
    TF_RETURN_IF_ERROR(c->GetAttr("postscale_factor", &post));
    return absl::OkStatus();
  }
  // Complex tensors travel as pairs of reals: only Sum and Average make sense.
  absl::Status CheckComplex(DataType dt, const char* what) const {
    if ((dt == tensorflow::DT_COMPLEX64 || dt == tensorflow::DT_COMPLEX128) &&
        op != PLAIT_OP_SUM && op != PLAIT_OP_AVERAGE)
      return absl::InvalidArgumentError(std::string("plait: PLAIT_ERR_UNSUPPORTED: ") + what +
                                        ": " + tensorflow::DataTypeString(dt) +
                                        " tensors reduce with Sum or Average only, not " +
                                        plait_op_name(op));
    return absl::OkStatus();
  }
};

class AllreduceOp : public AsyncOpKernel {
 public:
  explicit AllreduceOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
    OP_REQUIRES_OK(c, scaling_.Read(c));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    OP_REQUIRES_OK_ASYNC(ctx, scaling_.CheckComplex(in.dtype(), "allreduce"), done);
    plait_tensor_t tin, tout;
    OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kReduce, "allreduce", &tin, nullptr), done);
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    OP_REQUIRES_OK_ASYNC(ctx, Describe(*out, Use::kReduce, "allreduce", &tout, nullptr), done);
    const std::string& name = naming_.name;
    plait_op_t op = scaling_.op;
    Run(ctx, std::move(done), naming_.set, scaling_.pre, scaling_.post,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_allreduce_async(name.c_str(), &tin, &tout, op, o, h);
        },
        nullptr);
  }

 private:
  Naming naming_;
  Scaling scaling_;
};

class GroupedAllreduceOp : public AsyncOpKernel {
 public:
  explicit GroupedAllreduceOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
    OP_REQUIRES_OK(c, scaling_.Read(c));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    auto names = std::make_shared<std::vector<std::string>>();
    std::vector<const char*> cnames(n);
    std::vector<plait_tensor_t> ins(n), outs(n);
    for (int i = 0; i < n; i++) {
      const Tensor& in = ctx->input(i);
      OP_REQUIRES_OK_ASYNC(ctx, scaling_.CheckComplex(in.dtype(), "grouped_allreduce"), done);
      OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kReduce, "grouped_allreduce", &ins[i], nullptr),
                           done);
      Tensor* out = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, in.shape(), &out),
                           done);
      OP_REQUIRES_OK_ASYNC(
          ctx, Describe(*out, Use::kReduce, "grouped_allreduce", &outs[i], nullptr), done);
      // Horovod's names for the members of a group: <name>_<i>of<n>.
      names->push_back(naming_.name + "_" + std::to_string(i + 1) + "of" + std::to_string(n));
    }
    for (int i = 0; i < n; i++) cnames[i] = (*names)[i].c_str();
    plait_op_t op = scaling_.op;
    Run(ctx, std::move(done), naming_.set, scaling_.pre, scaling_.post,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_grouped_allreduce_async((size_t)n, cnames.data(), ins.data(), outs.data(),
                                               op, o, h);
        },
        nullptr, names);
  }

 private:
  Naming naming_;
  Scaling scaling_;
};

class AllgatherOp : public AsyncOpKernel {
 public:
  explicit AllgatherOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                      absl::InvalidArgumentError(
                          "plait: PLAIT_ERR_INVALID_ARGUMENT: allgather '" + naming_.name +
                          "': a scalar has no first dimension to concatenate along; "
                          "reshape it to [1]"),
                      done);
    plait_tensor_t tin;
    bool extra = false;
    OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kMove, "allgather", &tin, &extra), done);
    const std::string& name = naming_.name;
    DataType dt = in.dtype();
    Run(ctx, std::move(done), naming_.set, 1.0, 1.0,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_allgather_async(name.c_str(), &tin, o, h);
        },
        [ctx, dt, extra](plait_handle_t* h) {
          plait_tensor_t result;
          plait_result_t rc = plait_handle_output(h, &result);
          if (rc != PLAIT_SUCCESS) return FromPlait(rc, plait_last_error());
          return CopyOutput(ctx, 0, dt, result, extra);
        });
  }

 private:
  Naming naming_;
};

class BroadcastOp : public AsyncOpKernel {
 public:
  explicit BroadcastOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    plait_tensor_t t;
    OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kMove, "broadcast", &t, nullptr), done);
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    if (out->tensor_data().data() != in.tensor_data().data() && in.TotalBytes() > 0)
      std::memcpy(const_cast<char*>(out->tensor_data().data()), in.tensor_data().data(),
                  in.tensor_data().size());
    OP_REQUIRES_OK_ASYNC(ctx, Describe(*out, Use::kMove, "broadcast", &t, nullptr), done);
    const std::string& name = naming_.name;
    int root = root_;
    Run(ctx, std::move(done), naming_.set, 1.0, 1.0,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_broadcast_async(name.c_str(), &t, root, o, h);
        },
        nullptr);
  }

 private:
  Naming naming_;
  int root_ = 0;
};

class AlltoallOp : public AsyncOpKernel {
 public:
  explicit AlltoallOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    const Tensor& splits = ctx->input(1);
    int size = 0;  // of the process set: one split per member
    plait_result_t rc = plait_process_set_size(naming_.set, &size);
    OP_REQUIRES_OK_ASYNC(ctx, FromPlait(rc, plait_last_error()), done);
    OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                      absl::InvalidArgumentError(
                          "plait: PLAIT_ERR_INVALID_ARGUMENT: alltoall '" + naming_.name +
                          "': a scalar has no first dimension to split"),
                      done);
    OP_REQUIRES_ASYNC(
        ctx, splits.dims() == 1 && (splits.NumElements() == 0 || splits.NumElements() == size),
        absl::InvalidArgumentError("plait: PLAIT_ERR_INVALID_ARGUMENT: alltoall '" +
                                   naming_.name + "': splits must be a vector of " +
                                   std::to_string(size) + " entries (one per rank of the set), not shape " +
                                   splits.shape().DebugString()),
        done);
    auto split64 = std::make_shared<std::vector<int64_t>>();
    auto flat = splits.flat<int32_t>();
    for (int i = 0; i < splits.NumElements(); i++) split64->push_back(flat(i));
    plait_tensor_t tin;
    bool extra = false;
    OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kMove, "alltoall", &tin, &extra), done);
    const std::string& name = naming_.name;
    DataType dt = in.dtype();
    const int64_t* sp = split64->empty() ? nullptr : split64->data();
    Run(ctx, std::move(done), naming_.set, 1.0, 1.0,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_alltoall_async(name.c_str(), &tin, sp, o, h);
        },
        [ctx, dt, extra, size](plait_handle_t* h) {
          plait_tensor_t result;
          plait_result_t r = plait_handle_output(h, &result);
          if (r != PLAIT_SUCCESS) return FromPlait(r, plait_last_error());
          absl::Status st = CopyOutput(ctx, 0, dt, result, extra);
          if (!st.ok()) return st;
          std::vector<int64_t> got(size);
          r = plait_handle_splits(h, got.data(), got.size());
          if (r != PLAIT_SUCCESS) return FromPlait(r, plait_last_error());
          Tensor* rs = nullptr;
          st = ctx->allocate_output(1, TensorShape({size}), &rs);
          if (!st.ok()) return st;
          auto out = rs->flat<int32_t>();
          for (int i = 0; i < size; i++) out(i) = (int32_t)got[i];
          return absl::OkStatus();
        },
        split64);
  }

 private:
  Naming naming_;
};

class ReducescatterOp : public AsyncOpKernel {
 public:
  explicit ReducescatterOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, naming_.Read(c));
    OP_REQUIRES_OK(c, scaling_.Read(c));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    OP_REQUIRES_OK_ASYNC(ctx, scaling_.CheckComplex(in.dtype(), "reducescatter"), done);
    OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                      absl::InvalidArgumentError(
                          "plait: PLAIT_ERR_INVALID_ARGUMENT: reducescatter '" + naming_.name +
                          "': a scalar has no first dimension to scatter"),
                      done);
    plait_tensor_t tin;
    bool extra = false;
    OP_REQUIRES_OK_ASYNC(ctx, Describe(in, Use::kReduce, "reducescatter", &tin, &extra), done);
    const std::string& name = naming_.name;
    plait_op_t op = scaling_.op;
    DataType dt = in.dtype();
    Run(ctx, std::move(done), naming_.set, scaling_.pre, scaling_.post,
        [&](const plait_op_options_t* o, plait_handle_t** h) {
          return plait_reducescatter_async(name.c_str(), &tin, op, o, h);
        },
        [ctx, dt, extra](plait_handle_t* h) {
          plait_tensor_t result;
          plait_result_t rc = plait_handle_output(h, &result);
          if (rc != PLAIT_SUCCESS) return FromPlait(rc, plait_last_error());
          return CopyOutput(ctx, 0, dt, result, extra);
        });
  }

 private:
  Naming naming_;
  Scaling scaling_;
};

class JoinOp : public AsyncOpKernel {
 public:
  explicit JoinOp(OpKernelConstruction* c) : AsyncOpKernel(c) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Run(ctx, std::move(done), 0, 1.0, 1.0,
        [](const plait_op_options_t* o, plait_handle_t** h) { return plait_join_async(o, h); },
        [ctx](plait_handle_t* h) {
          int last = -1;
          plait_result_t rc = plait_handle_join_rank(h, &last);
          if (rc != PLAIT_SUCCESS) return FromPlait(rc, plait_last_error());
          Tensor* out = nullptr;
          absl::Status st = ctx->allocate_output(0, TensorShape({}), &out);
          if (!st.ok()) return st;
          out->scalar<int32_t>()() = last;
          return absl::OkStatus();
        });
  }
};

class BarrierOp : public AsyncOpKernel {
 public:
  explicit BarrierOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, ReadProcessSet(c, &set_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Run(ctx, std::move(done), set_, 1.0, 1.0,
        [](const plait_op_options_t* o, plait_handle_t** h) { return plait_barrier_async(o, h); },
        nullptr);
  }

 private:
  int32_t set_ = 0;
};

}  // namespace

using tensorflow::DEVICE_CPU;
REGISTER_KERNEL_BUILDER(Name("PlaitAllreduce").Device(DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("PlaitGroupedAllreduce").Device(DEVICE_CPU), GroupedAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("PlaitAllgather").Device(DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("PlaitBroadcast").Device(DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("PlaitAlltoall").Device(DEVICE_CPU).HostMemory("splits")
                            .HostMemory("received_splits"),
                        AlltoallOp);
REGISTER_KERNEL_BUILDER(Name("PlaitReducescatter").Device(DEVICE_CPU), ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("PlaitJoin").Device(DEVICE_CPU), JoinOp);
REGISTER_KERNEL_BUILDER(Name("PlaitBarrier").Device(DEVICE_CPU), BarrierOp);

}  // namespace plait_tf
