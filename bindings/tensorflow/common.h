// plait's TensorFlow op library: what every kernel shares.
//
// The kernels are thin: each one describes its TensorFlow tensors to plait's
// C ABI (include/plait/plait.h), submits the operation with a completion
// callback and returns. plait calls the callback on its coordinator thread;
// the callback only hands the rest of the work (reading plait's output,
// allocating TensorFlow outputs, done()) to TensorFlow's CPU worker pool, so
// no TensorFlow work ever runs on the coordinator and no TensorFlow thread
// ever blocks on plait.
#ifndef PLAIT_TF_COMMON_H
#define PLAIT_TF_COMMON_H

#include <functional>
#include <string>

#include <plait/plait.h>

#include "tensorflow/core/framework/op_kernel.h"

namespace plait_tf {

using tensorflow::AsyncOpKernel;
using tensorflow::DataType;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;

// Horovod 0.28's reduction constants (horovod.common.basics), which the
// Python layer passes as the reduce_op attribute.
enum HorovodOp { kAverage = 0, kSum = 1, kAdasum = 2, kMin = 3, kMax = 4, kProduct = 5 };

// plait's op for a Horovod constant; an error status for Adasum or a bad value.
absl::Status PlaitOp(int horovod_op, plait_op_t* out);

// The TensorFlow status for a plait result and message. The codes follow
// Horovod's TensorFlow ops: bad arguments are InvalidArgument, mismatched
// operations and calls before init FailedPrecondition, an operation cut short
// by shutdown Aborted, a lost rank or a failed transport Unknown. The message
// starts with "plait: <RESULT_NAME>: " so the Python layer can raise plait's
// own exception class for it.
absl::Status FromPlait(plait_result_t rc, const std::string& message);

// How a tensor is handed to plait.
enum class Use {
  kReduce,         // a dtype plait reduces; complex Sum/Average as pairs of reals
  kReduceNoPairs,  // a dtype plait reduces, nothing else
  kMove,           // any fixed-size dtype; unknown ones travel as bytes
};

// Describes t for plait. what names the operation in messages. For kMove a
// dtype plait lacks is described as uint8 with one more dimension (the
// element's bytes); for kReduce complex is described as float32/float64 with
// one more dimension of 2. *extra_dim says whether the description has that
// extra last dimension (may be NULL).
absl::Status Describe(const Tensor& t, Use use, const char* what, plait_tensor_t* out,
                      bool* extra_dim);

// The name plait matches the operation by: tensor_name when set, else the
// kernel's node name (without its name scope when ignore_name_scope).
std::string OperationName(const std::string& tensor_name, const std::string& node_name,
                          bool ignore_name_scope);

// Runs an asynchronous plait operation for an AsyncOpKernel.
//
// submit(opts, &handle) calls a plait_*_async function with opts (which carry
// the completion callback). When the operation finishes, finish(handle) runs
// on TensorFlow's worker pool (only on success) to produce the outputs; then
// the handle is released and done() called. An error from submit, from the
// operation, or from finish becomes the kernel's status. keep is destroyed
// after the handle is released: it owns whatever plait must read until then.
using Submit = std::function<plait_result_t(const plait_op_options_t*, plait_handle_t**)>;
using Finish = std::function<absl::Status(plait_handle_t*)>;
// process_set: the plait process set the operation runs on (0: every rank).
void Run(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done, int32_t process_set,
         double prescale, double postscale, const Submit& submit, Finish finish,
         std::shared_ptr<void> keep = nullptr);

// Ends every kernel still waiting for plait now, with an OK status and
// outputs of zeros of their own (an error status would make TensorFlow build
// its Python exception while the signal's handler is pending: the handler
// runs inside that constructor and pybind11 replaces its exception with a
// RuntimeError). plait keeps the operation: the tensors it reads and writes
// stay referenced until plait completes it (or fails it: a peer lost,
// shutdown), and its handle is released then. The names and why are written
// to stderr and kept for TakeAbandoned. Returns how many kernels it ended.
// Python calls it through plait_tf_abandon_pending(const char* why) when a
// signal arrives during a wait (docs/tensorflow.md, "Ctrl-C and other
// signals during a wait").
int AbandonPending(const std::string& why);

// "plait: operation 'x' abandoned: <why>" for what AbandonPending ended
// since the last call, into buf; 1 when there was some, else 0. Python's
// eager call raises it (plait_tf_take_abandoned) when the signal's handler
// did not raise.
int TakeAbandoned(char* buf, size_t size);

// Reads the process_set_id attribute; an id that does not fit plait's
// int32_t is refused (plait itself checks that the set exists and that this
// rank is in it when the operation is submitted).
absl::Status ReadProcessSet(tensorflow::OpKernelConstruction* c, int32_t* out);

// Allocates output index of ctx with the shape and data of plait's output
// tensor (allgather, alltoall, reducescatter). extra_dim: as Describe set it
// (plait's last dimension is dropped again).
absl::Status CopyOutput(OpKernelContext* ctx, int index, DataType dtype,
                        const plait_tensor_t& result, bool extra_dim);

}  // namespace plait_tf

#endif  // PLAIT_TF_COMMON_H
