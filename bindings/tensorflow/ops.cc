// plait's TensorFlow op library: the op definitions (names, inputs, outputs,
// attributes, shape functions). The kernels are in kernels_*.cc.
//
// Every collective carries Horovod's attributes: tensor_name (the name plait
// matches the operation by across ranks; empty: the node's name, which
// TensorFlow keeps unique in a graph), ignore_name_scope, process_set_id
// (plait_op_options_t.process_set; 0 is every rank); reductions carry reduce_op with
// Horovod's constants and the scale factors as float, as Horovod's ops do.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace plait_tf {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

#define PLAIT_NAME_ATTRS                       \
  Attr("tensor_name: string = ''")             \
      .Attr("ignore_name_scope: bool = false") \
      .Attr("process_set_id: int = 0")

#define PLAIT_SCALE_ATTRS                    \
  Attr("reduce_op: int")                     \
      .Attr("prescale_factor: float = 1.0")  \
      .Attr("postscale_factor: float = 1.0")

// The input's shape with an unknown first dimension.
static absl::Status UnknownRows(InferenceContext* c) {
  ShapeHandle out;
  ShapeHandle in = c->input(0);
  if (!c->RankKnown(in)) {
    c->set_output(0, c->UnknownShape());
    return absl::OkStatus();
  }
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &in));
  TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

REGISTER_OP("PlaitAllreduce")
    .Attr("T: type")
    .Input("tensor: T")
    .Output("output: T")
    .PLAIT_SCALE_ATTRS.PLAIT_NAME_ATTRS
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("PlaitGroupedAllreduce")
    .Attr("T: type")
    .Attr("N: int >= 1")
    .Input("tensors: N * T")
    .Output("outputs: N * T")
    .PLAIT_SCALE_ATTRS.PLAIT_NAME_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); i++) c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

REGISTER_OP("PlaitAllgather")
    .Attr("T: type")
    .Input("tensor: T")
    .Output("output: T")
    .PLAIT_NAME_ATTRS
    .SetShapeFn(UnknownRows);

REGISTER_OP("PlaitBroadcast")
    .Attr("T: type")
    .Attr("root_rank: int")
    .Input("tensor: T")
    .Output("output: T")
    .PLAIT_NAME_ATTRS
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("PlaitAlltoall")
    .Attr("T: type")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .PLAIT_NAME_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(UnknownRows(c));
      c->set_output(1, c->Vector(InferenceContext::kUnknownDim));
      return absl::OkStatus();
    });

REGISTER_OP("PlaitReducescatter")
    .Attr("T: type")
    .Input("tensor: T")
    .Output("output: T")
    .PLAIT_SCALE_ATTRS.PLAIT_NAME_ATTRS
    .SetShapeFn(UnknownRows);

// join and barrier are stateful: tf.function keeps them, in program order.
REGISTER_OP("PlaitJoin")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape);

REGISTER_OP("PlaitBarrier")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);

// rank, size, local_rank, local_size, cross_rank, cross_size or
// process_set_included, read when the op runs (Horovod's *_op functions);
// stateful, so that graph optimisation never folds it into a constant.
REGISTER_OP("PlaitQuery")
    .Attr("query: string")
    .Attr("process_set_id: int = 0")
    .Output("value: int32")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape);

}  // namespace plait_tf
