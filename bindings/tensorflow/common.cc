// plait's TensorFlow op library: dtypes, statuses, names and the
// asynchronous completion path shared by the kernels (common.h).
#include "common.h"

#include <cstring>
#include <memory>
#include <utility>

#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/util/work_sharder.h"

namespace plait_tf {

using tensorflow::DataTypeString;
using tensorflow::DataTypeCanUseMemcpy;
using tensorflow::DataTypeSize;

absl::Status PlaitOp(int horovod_op, plait_op_t* out) {
  switch (horovod_op) {
    case kAverage: *out = PLAIT_OP_AVERAGE; return absl::OkStatus();
    case kSum: *out = PLAIT_OP_SUM; return absl::OkStatus();
    case kMin: *out = PLAIT_OP_MIN; return absl::OkStatus();
    case kMax: *out = PLAIT_OP_MAX; return absl::OkStatus();
    case kProduct: *out = PLAIT_OP_PRODUCT; return absl::OkStatus();
    case kAdasum:
      return absl::InvalidArgumentError(
          "plait: PLAIT_ERR_UNSUPPORTED: Adasum is not supported by plait; use Average or Sum");
    default:
      return absl::InvalidArgumentError("plait: PLAIT_ERR_INVALID_ARGUMENT: reduce_op " +
                                        std::to_string(horovod_op) +
                                        " is not one of Average (0), Sum (1), Min (3), Max (4), "
                                        "Product (5)");
  }
}

absl::Status FromPlait(plait_result_t rc, const std::string& message) {
  std::string text = std::string("plait: ") + plait_result_name(rc) + ": " + message;
  switch (rc) {
    case PLAIT_SUCCESS:
      return absl::OkStatus();
    case PLAIT_ERR_INVALID_ARGUMENT:
    case PLAIT_ERR_UNSUPPORTED:
    case PLAIT_ERR_CONFIG:
    case PLAIT_ERR_BUFFER_TOO_SMALL:
      return absl::InvalidArgumentError(text);
    case PLAIT_ERR_NOT_INITIALIZED:
    case PLAIT_ERR_MISMATCH:
    case PLAIT_ERR_STALLED:
      return absl::FailedPreconditionError(text);
    case PLAIT_ERR_SHUTDOWN:
      return absl::AbortedError(text);
    default:
      return absl::UnknownError(text);
  }
}

static bool ToPlait(DataType t, plait_dtype_t* out) {
  switch (t) {
    case tensorflow::DT_UINT8: *out = PLAIT_UINT8; return true;
    case tensorflow::DT_INT8: *out = PLAIT_INT8; return true;
    case tensorflow::DT_UINT16: *out = PLAIT_UINT16; return true;
    case tensorflow::DT_INT16: *out = PLAIT_INT16; return true;
    case tensorflow::DT_INT32: *out = PLAIT_INT32; return true;
    case tensorflow::DT_INT64: *out = PLAIT_INT64; return true;
    case tensorflow::DT_HALF: *out = PLAIT_FLOAT16; return true;
    case tensorflow::DT_BFLOAT16: *out = PLAIT_BFLOAT16; return true;
    case tensorflow::DT_FLOAT: *out = PLAIT_FLOAT32; return true;
    case tensorflow::DT_DOUBLE: *out = PLAIT_FLOAT64; return true;
    case tensorflow::DT_BOOL: *out = PLAIT_BOOL; return true;
    default: return false;
  }
}

absl::Status Describe(const Tensor& t, Use use, const char* what, plait_tensor_t* out,
                      bool* extra_dim) {
  std::memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->device = PLAIT_DEVICE_HOST;
  DataType dt = t.dtype();
  int dims = t.dims();
  if (dims > PLAIT_MAX_DIMS)
    return absl::InvalidArgumentError(std::string("plait: PLAIT_ERR_INVALID_ARGUMENT: ") + what +
                                      ": a tensor of " + std::to_string(dims) +
                                      " dimensions; plait takes at most " +
                                      std::to_string(PLAIT_MAX_DIMS));
  for (int i = 0; i < dims; i++) out->shape[i] = t.dim_size(i);
  out->ndim = dims;
  if (extra_dim) *extra_dim = false;
  // tensor_data() is only defined for fixed-size types (a string tensor
  // would abort the process): the dtype is checked first.
  if (ToPlait(dt, &out->dtype)) {
    out->data = const_cast<char*>(t.tensor_data().data());
    return absl::OkStatus();
  }
  if (use == Use::kReduce && (dt == tensorflow::DT_COMPLEX64 || dt == tensorflow::DT_COMPLEX128)) {
    if (dims == PLAIT_MAX_DIMS)
      return absl::InvalidArgumentError(std::string("plait: PLAIT_ERR_INVALID_ARGUMENT: ") +
                                        what + ": a complex tensor of 16 dimensions is too "
                                        "many for plait (it reduces it as pairs of reals)");
    out->dtype = dt == tensorflow::DT_COMPLEX64 ? PLAIT_FLOAT32 : PLAIT_FLOAT64;
    out->shape[dims] = 2;
    out->ndim = dims + 1;
    out->data = const_cast<char*>(t.tensor_data().data());
    if (extra_dim) *extra_dim = true;
    return absl::OkStatus();
  }
  if (use == Use::kMove && DataTypeCanUseMemcpy(dt) && DataTypeSize(dt) > 0) {
    if (dims == PLAIT_MAX_DIMS)
      return absl::InvalidArgumentError(std::string("plait: PLAIT_ERR_INVALID_ARGUMENT: ") +
                                        what + ": a " + DataTypeString(dt) +
                                        " tensor of 16 dimensions is too many for plait (it "
                                        "moves this dtype as bytes, in one more dimension)");
    out->dtype = PLAIT_UINT8;
    out->shape[dims] = DataTypeSize(dt);
    out->ndim = dims + 1;
    out->data = const_cast<char*>(t.tensor_data().data());
    if (extra_dim) *extra_dim = true;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      std::string("plait: PLAIT_ERR_UNSUPPORTED: ") + what + ": plait cannot " +
      (use == Use::kMove ? "move" : "reduce") + " tensors of dtype " + DataTypeString(dt) +
      (use == Use::kMove ? " (not a fixed-size type)"
                         : "; it reduces uint8, int8, uint16, int16, int32, int64, float16, "
                           "bfloat16, float32, float64, bool (and complex64/128 with Sum or "
                           "Average)"));
}

std::string OperationName(const std::string& tensor_name, const std::string& node_name,
                          bool ignore_name_scope) {
  std::string name = tensor_name.empty() ? node_name : tensor_name;
  if (ignore_name_scope) {
    size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
  }
  return name;
}

namespace {

struct State {
  OpKernelContext* ctx;
  AsyncOpKernel::DoneCallback done;
  Finish finish;
  std::shared_ptr<void> keep;
};

// Runs on TensorFlow's worker pool once the operation has finished.
void Complete(State* s, plait_handle_t* handle) {
  plait_result_t rc = plait_wait(handle, 0);  // finished: returns its result at once
  absl::Status status;
  if (rc != PLAIT_SUCCESS)
    status = FromPlait(rc, plait_last_error());
  else if (s->finish)
    status = s->finish(handle);
  plait_release(handle);
  s->keep.reset();
  if (!status.ok()) s->ctx->SetStatus(status);
  AsyncOpKernel::DoneCallback done = std::move(s->done);
  delete s;
  done();
}

// plait's completion callback, on the coordinator thread: it only schedules.
void OnComplete(plait_handle_t* handle, plait_result_t, void* user_data) {
  State* s = static_cast<State*>(user_data);
  const auto* workers = s->ctx->device()->tensorflow_cpu_worker_threads();
  if (workers && workers->workers) {
    workers->workers->Schedule([s, handle] { Complete(s, handle); });
  } else {
    tensorflow::Env::Default()->SchedClosure([s, handle] { Complete(s, handle); });
  }
}

}  // namespace

absl::Status ReadProcessSet(tensorflow::OpKernelConstruction* c, int32_t* out) {
  int64_t set = 0;
  TF_RETURN_IF_ERROR(c->GetAttr("process_set_id", &set));
  if (set < 0 || set > INT32_MAX)
    return absl::InvalidArgumentError("plait: PLAIT_ERR_INVALID_ARGUMENT: process_set_id " +
                                      std::to_string(set) + " is not a process set id");
  *out = (int32_t)set;
  return absl::OkStatus();
}

void Run(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done, int32_t process_set,
         double prescale, double postscale, const Submit& submit, Finish finish,
         std::shared_ptr<void> keep) {
  State* s = new State{ctx, std::move(done), std::move(finish), std::move(keep)};
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.process_set = process_set;
  opts.prescale_factor = prescale;
  opts.postscale_factor = postscale;
  opts.callback = OnComplete;
  opts.user_data = s;
  plait_handle_t* handle = nullptr;
  plait_result_t rc = submit(&opts, &handle);
  if (rc != PLAIT_SUCCESS) {  // no callback will come
    ctx->SetStatus(FromPlait(rc, plait_last_error()));
    AsyncOpKernel::DoneCallback d = std::move(s->done);
    delete s;
    d();
  }
  // On success the callback owns s and releases the handle.
}

absl::Status CopyOutput(OpKernelContext* ctx, int index, DataType,
                        const plait_tensor_t& result, bool extra_dim) {
  TensorShape shape;
  int dims = result.ndim - (extra_dim ? 1 : 0);
  for (int i = 0; i < dims; i++) {
    absl::Status st = shape.AddDimWithStatus(result.shape[i]);
    if (!st.ok()) return st;
  }
  Tensor* out = nullptr;
  absl::Status st = ctx->allocate_output(index, shape, &out);
  if (!st.ok()) return st;
  size_t bytes = out->tensor_data().size();
  size_t have = (size_t)plait_dtype_size(result.dtype);
  for (int i = 0; i < result.ndim; i++) have *= (size_t)result.shape[i];
  if (have != bytes)
    return absl::InternalError("plait: PLAIT_ERR_INTERNAL: output of " + std::to_string(have) +
                               " bytes for a TensorFlow tensor of " + std::to_string(bytes));
  if (bytes) std::memcpy(const_cast<char*>(out->tensor_data().data()), result.data, bytes);
  return absl::OkStatus();
}

}  // namespace plait_tf
