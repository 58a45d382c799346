// plait's TensorFlow op library: dtypes, statuses, names and the
// asynchronous completion path shared by the kernels (common.h).
#include "common.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/node_def_util.h"
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
  // For abandonment (AbandonPending): the kernel's node name, its inputs and
  // the outputs it had allocated when it submitted (plait reads and writes
  // them until it completes the operation), and whether done() was called
  // early. Guarded by g_mutex while the kernel is pending.
  std::string node;
  std::vector<Tensor> held;
  bool abandoned = false;
};

// The kernels submitted to plait whose done() has not been called yet.
std::mutex g_mutex;
std::set<State*>* g_pending = new std::set<State*>;  // never destroyed: used at exit

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

// plait's completion callback, on the coordinator thread: it only schedules,
// except for an abandoned kernel (done() was called early, its ctx is gone),
// whose handle and tensors are released here (plait allows the release).
void OnComplete(plait_handle_t* handle, plait_result_t, void* user_data) {
  State* s = static_cast<State*>(user_data);
  const tensorflow::DeviceBase::CpuWorkerThreads* workers = nullptr;
  bool abandoned;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pending->erase(s);
    abandoned = s->abandoned;
    if (!abandoned) workers = s->ctx->device()->tensorflow_cpu_worker_threads();
  }
  if (abandoned) {  // nobody else has s now
    plait_release(handle);
    delete s;  // the last references to the tensors plait used
    return;
  }
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
  State* s = new State;
  s->ctx = ctx;
  s->done = std::move(done);
  s->finish = std::move(finish);
  s->keep = std::move(keep);
  // The name plait knows it by: tensor_name when set (eager calls), else the node's.
  if (!tensorflow::TryGetNodeAttr(ctx->op_kernel().def(), "tensor_name", &s->node) ||
      s->node.empty())
    s->node = ctx->op_kernel().name();
  for (int i = 0; i < ctx->num_inputs(); i++) s->held.push_back(ctx->input(i));
  for (int i = 0; i < ctx->num_outputs(); i++)
    if (Tensor* t = ctx->mutable_output(i)) s->held.push_back(*t);
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.process_set = process_set;
  opts.prescale_factor = prescale;
  opts.postscale_factor = postscale;
  opts.callback = OnComplete;
  opts.user_data = s;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pending->insert(s);
  }
  plait_handle_t* handle = nullptr;
  plait_result_t rc = submit(&opts, &handle);
  if (rc != PLAIT_SUCCESS) {  // no callback will come
    std::string message = plait_last_error();
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_pending->erase(s);
      if (s->abandoned) {  // done() was already called
        delete s;
        return;
      }
    }
    ctx->SetStatus(FromPlait(rc, message));
    AsyncOpKernel::DoneCallback d = std::move(s->done);
    delete s;
    d();
  }
  // On success the callback owns s and releases the handle.
}

namespace {

// What abandoned operations not yet reported to Python were (g_mutex).
std::string* g_report = new std::string;  // never destroyed: used at exit

// Gives an abandoned kernel outputs of its own, zero-filled: plait may still
// write the ones it had (s->held keeps them alive for it), and TensorFlow
// needs every output to end with an OK status. Shapes: an input's where the
// output has one at its index (allreduce, broadcast, grouped members,
// allgather, alltoall's received_splits take splits' shape), else a scalar
// (join).
void GiveZeroOutputs(OpKernelContext* ctx) {
  for (int i = 0; i < ctx->num_outputs(); i++) {
    TensorShape shape;
    if (i < ctx->num_inputs()) shape = ctx->input(i).shape();
    Tensor* out = ctx->mutable_output(i);
    absl::Status st;
    if (out == nullptr) {
      st = ctx->allocate_output(i, shape, &out);
    } else {
      Tensor fresh;
      st = ctx->allocate_temp(out->dtype(), out->shape(), &fresh);
      if (st.ok()) *out = fresh;  // the old buffer stays referenced in held
    }
    if (!st.ok()) {  // out of memory: the kernel fails instead
      ctx->SetStatus(st);
      return;
    }
    if (out->TotalBytes() > 0 && DataTypeCanUseMemcpy(out->dtype()))
      std::memset(const_cast<char*>(out->tensor_data().data()), 0, out->tensor_data().size());
  }
}

}  // namespace

int AbandonPending(const std::string& why) {
  std::vector<AsyncOpKernel::DoneCallback> ended;
  std::string names;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (State* s : *g_pending) {
      if (s->abandoned) continue;
      s->abandoned = true;  // from here nothing else touches s->ctx
      GiveZeroOutputs(s->ctx);
      names += (names.empty() ? "'" : ", '") + s->node + "'";
      ended.push_back(std::move(s->done));
    }
    if (!ended.empty()) {
      std::string line = "plait: operation" + std::string(ended.size() > 1 ? "s " : " ") +
                         names + " abandoned: " + why;
      *g_report += (g_report->empty() ? "" : "; ") + line;
      std::fprintf(stderr, "%s (plait completes %s in the background; the outputs TensorFlow "
                   "got are zeros)\n", line.c_str(), ended.size() > 1 ? "them" : "it");
    }
  }
  // Outside the lock and on TensorFlow's threads (the caller is Python's
  // signal watcher): done() may run more of the graph, which may register.
  for (auto& d : ended) tensorflow::Env::Default()->SchedClosure(std::move(d));
  return (int)ended.size();
}

int TakeAbandoned(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_report->empty()) return 0;
  if (buf && size) std::snprintf(buf, size, "%s", g_report->c_str());
  g_report->clear();
  return 1;
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

// For plait.tensorflow._interrupt (ctypes).
extern "C" __attribute__((visibility("default"))) int plait_tf_abandon_pending(const char* why) {
  return plait_tf::AbandonPending(why ? why : "abandoned");
}

extern "C" __attribute__((visibility("default"))) int plait_tf_take_abandoned(char* buf,
                                                                            size_t size) {
  return plait_tf::TakeAbandoned(buf, size);
}
