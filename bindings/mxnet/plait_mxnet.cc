// plait's MXNet engine adapter (see plait_mxnet.h): a plait operation on
// NDArrays as an asynchronous operation of MXNet's dependency engine.
//
// Thread roles:
//  - the caller (Python) pushes; it never waits here except in
//    plait_mx_ticket_wait;
//  - an MXNet engine thread runs Run(): it reads the data pointers and submits
//    to plait, then returns at once;
//  - plait's coordinator thread runs Done(): it records the result and calls
//    MXNet's completion callback. Nothing else of MXNet's runs there.
#include "plait_mxnet.h"

#include <mxnet/c_api.h>
#include <mxnet/engine.h>

#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

struct plait_mx_ticket {
  std::mutex mu;
  std::condition_variable cv;
  bool submitted = false;  // plait accepted or refused it (MXNet ran Run)
  bool done = false;
  int refs = 2;  // the caller's and the operation's
  int result = PLAIT_SUCCESS;
  std::string message;
  plait_handle_t *handle = nullptr;
};

namespace {

thread_local std::string last_error;

struct Op {
  int kind = 0;
  std::vector<std::string> names;
  std::vector<NDArrayHandle> inputs;   // shallow copies, freed with the Op
  std::vector<NDArrayHandle> outputs;  // shallow copies (in place: empty)
  std::vector<plait_tensor_t> tensors;
  int op = 0;
  double prescale = 1.0, postscale = 1.0;
  int root = 0;
  int32_t process_set = 0;
  std::vector<int64_t> splits;
  bool has_splits = false;
  plait_mx_ticket_t *ticket = nullptr;
  mxnet::engine::CallbackOnComplete on_complete;
};

void Unref(plait_mx_ticket_t *t) {
  bool last;
  {
    std::lock_guard<std::mutex> lock(t->mu);
    last = --t->refs == 0;
  }
  if (last) {
    plait_release(t->handle);
    delete t;
  }
}

void FreeOp(void *param) {
  Op *op = static_cast<Op *>(param);
  for (NDArrayHandle h : op->inputs) MXNDArrayFree(h);
  for (NDArrayHandle h : op->outputs) MXNDArrayFree(h);
  delete op;
}

// Ends the engine operation: the ticket is told first (the caller may be
// waiting on it), then MXNet. A failure of a non-ticket operation becomes an
// exception on its outputs ("PLAIT_ERR_...: message", which plait.mxnet maps to
// its exception classes); a ticket's failure is raised by the caller instead.
void Finish(Op *op, plait_handle_t *handle, int result, const std::string &message) {
  mxnet::engine::CallbackOnComplete on_complete = op->on_complete;
  if (op->ticket) {
    plait_mx_ticket_t *t = op->ticket;
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->submitted = true;
      t->done = true;
      t->result = result;
      t->message = message;
      t->handle = handle;
    }
    t->cv.notify_all();
    Unref(t);
    on_complete();
    return;
  }
  plait_release(handle);
  if (result == PLAIT_SUCCESS) {
    on_complete();
  } else {
    dmlc::Error error(std::string(plait_result_name(static_cast<plait_result_t>(result))) +
                      ": " + message);
    on_complete(&error);
  }
}

void Done(plait_handle_t *handle, plait_result_t result, void *user) {
  std::string message;
  if (result != PLAIT_SUCCESS) {
    plait_wait(handle, 0);  // finished: sets plait_last_error to its message
    message = plait_last_error();
  }
  Finish(static_cast<Op *>(user), handle, result, message);
}

bool DataOf(NDArrayHandle h, void **data) {
  *data = nullptr;
  return MXNDArrayGetData(h, data) == 0;
}

void Run(void * /*rctx*/, void *on_complete, void *param) {
  Op *op = static_cast<Op *>(param);
  op->on_complete = *static_cast<mxnet::engine::CallbackOnComplete *>(on_complete);
  size_t n = op->tensors.size();
  std::vector<plait_tensor_t> in(op->tensors), out;
  for (size_t i = 0; i < n; ++i) {
    if (!DataOf(op->inputs[i], &in[i].data)) {
      Finish(op, nullptr, PLAIT_ERR_INTERNAL,
             std::string("MXNDArrayGetData failed: ") + MXGetLastError());
      return;
    }
  }
  out = in;
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    if (!DataOf(op->outputs[i], &out[i].data)) {
      Finish(op, nullptr, PLAIT_ERR_INTERNAL,
             std::string("MXNDArrayGetData failed: ") + MXGetLastError());
      return;
    }
  }
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.prescale_factor = op->prescale;
  opts.postscale_factor = op->postscale;
  opts.callback = Done;
  opts.user_data = op;
  opts.process_set = op->process_set;
  plait_handle_t *handle = nullptr;
  plait_result_t rc = PLAIT_ERR_INVALID_ARGUMENT;
  const char *name = op->names[0].c_str();
  // Once submitted, Done() may end op (and drop its ticket reference) at any
  // time: this reference keeps the ticket for marking it submitted below.
  plait_mx_ticket_t *t = op->ticket;
  if (t) {
    std::lock_guard<std::mutex> lock(t->mu);
    ++t->refs;
  }
  switch (op->kind) {
    case PLAIT_MX_ALLREDUCE:
      if (n == 1) {
        rc = plait_allreduce_async(name, &in[0], &out[0], static_cast<plait_op_t>(op->op),
                                   &opts, &handle);
      } else {
        std::vector<const char *> names;
        for (const std::string &s : op->names) names.push_back(s.c_str());
        rc = plait_grouped_allreduce_async(n, names.data(), in.data(), out.data(),
                                           static_cast<plait_op_t>(op->op), &opts, &handle);
      }
      break;
    case PLAIT_MX_BROADCAST:
      rc = plait_broadcast_async(name, &out[0], op->root, &opts, &handle);
      break;
    case PLAIT_MX_ALLGATHER:
      rc = plait_allgather_async(name, &in[0], &opts, &handle);
      break;
    case PLAIT_MX_ALLTOALL:
      rc = plait_alltoall_async(name, &in[0], op->has_splits ? op->splits.data() : nullptr,
                                &opts, &handle);
      break;
    case PLAIT_MX_REDUCESCATTER:
      rc = plait_reducescatter_async(name, &in[0], static_cast<plait_op_t>(op->op), &opts,
                                     &handle);
      break;
  }
  // On success Done() runs (maybe already has); after an error it never will.
  if (rc != PLAIT_SUCCESS) Finish(op, nullptr, rc, plait_last_error());
  if (t) {  // op may be gone already; t is not
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->submitted = true;
    }
    t->cv.notify_all();
    Unref(t);
  }
}

int Fail(const std::string &message) {
  last_error = message;
  return -1;
}

}  // namespace

extern "C" int plait_mx_push(const plait_mx_request_t *req, plait_mx_ticket_t **ticket) {
  if (!req || req->struct_size < PLAIT_MX_REQUEST_SIZE_V1)
    return Fail("plait_mx_push: request is NULL or from another version");
  bool wants_ticket = req->kind == PLAIT_MX_ALLGATHER || req->kind == PLAIT_MX_ALLTOALL ||
                      req->kind == PLAIT_MX_REDUCESCATTER;
  if (req->kind < PLAIT_MX_ALLREDUCE || req->kind > PLAIT_MX_REDUCESCATTER)
    return Fail("plait_mx_push: unknown kind " + std::to_string(req->kind));
  if (wants_ticket != (ticket != nullptr))
    return Fail("plait_mx_push: a ticket is needed exactly for allgather, alltoall, "
                "reducescatter");
  if (req->count < 1 || (req->count > 1 && req->kind != PLAIT_MX_ALLREDUCE))
    return Fail("plait_mx_push: bad count " + std::to_string(req->count));
  if (!req->names || !req->inputs || !req->tensors || (!wants_ticket && !req->outputs))
    return Fail("plait_mx_push: names, inputs, tensors (and outputs) must not be NULL");

  Op *op = new Op();
  op->kind = req->kind;
  op->op = req->op;
  op->prescale = req->prescale_factor;
  op->postscale = req->postscale_factor;
  op->root = req->root;
  if (req->struct_size >= offsetof(plait_mx_request_t, process_set) + sizeof(int32_t))
    op->process_set = req->process_set;
  if (req->splits) {
    op->splits.assign(req->splits, req->splits + req->nsplits);
    op->has_splits = true;
  }
  // Copies that share the arrays' memory keep it (and a valid handle) alive
  // until the operation is over, whatever Python does with its arrays.
  std::vector<NDArrayHandle> reads, writes;
  for (int i = 0; i < req->count; ++i) {
    op->names.emplace_back(req->names[i] ? req->names[i] : "");
    op->tensors.push_back(req->tensors[i]);
    bool in_place = !wants_ticket && req->outputs[i] == req->inputs[i];
    NDArrayHandle in = nullptr, out = nullptr;
    if (MXShallowCopyNDArray(req->inputs[i], &in) != 0 ||
        (!wants_ticket && MXShallowCopyNDArray(req->outputs[i], &out) != 0)) {
      std::string why = MXGetLastError();
      if (in) MXNDArrayFree(in);
      FreeOp(op);
      return Fail("plait_mx_push: MXShallowCopyNDArray failed: " + why);
    }
    op->inputs.push_back(in);
    if (out) op->outputs.push_back(out);
    if (in_place) {
      writes.push_back(req->inputs[i]);
    } else {
      reads.push_back(req->inputs[i]);
      if (!wants_ticket) writes.push_back(req->outputs[i]);
    }
  }
  plait_mx_ticket_t *t = nullptr;
  if (wants_ticket) {
    t = new plait_mx_ticket();
    op->ticket = t;
  }
  static const mxnet::Context cpu = mxnet::Context::CPU();
  static const mxnet::FnProperty prop = mxnet::FnProperty::kCPUPrioritized;
  const char *opr_name = "PlaitOp";
  if (MXEnginePushAsyncND(Run, op, FreeOp, const_cast<mxnet::Context *>(&cpu),
                          reads.empty() ? nullptr : reads.data(), static_cast<int>(reads.size()),
                          writes.empty() ? nullptr : writes.data(),
                          static_cast<int>(writes.size()),
                          const_cast<mxnet::FnProperty *>(&prop), req->priority, opr_name,
                          false) != 0) {
    // The engine did not take the operation. Whether it already called
    // FreeOp through its deleter is not known here: op is left (a leak
    // rather than a double free). plait.mxnet checks what MXNet would refuse
    // (an array both read and written) before pushing.
    std::string why = MXGetLastError();
    delete t;
    return Fail("plait_mx_push: MXEnginePushAsyncND failed: " + why);
  }
  if (ticket) *ticket = t;
  return 0;
}

namespace {

// Waits (at most timeout_s; < 0: no limit) until flag is set; true if it is.
bool WaitFor(plait_mx_ticket_t *t, std::unique_lock<std::mutex> &lock, double timeout_s,
             bool plait_mx_ticket::*flag) {
  if (timeout_s < 0) {
    t->cv.wait(lock, [t, flag] { return t->*flag; });
    return true;
  }
  return t->cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                        [t, flag] { return t->*flag; });
}

}  // namespace

extern "C" int plait_mx_ticket_wait(plait_mx_ticket_t *t, double timeout_s,
                                    const char **message) {
  if (message) *message = nullptr;
  if (!t) return PLAIT_ERR_INVALID_ARGUMENT;
  std::unique_lock<std::mutex> lock(t->mu);
  if (!WaitFor(t, lock, timeout_s, &plait_mx_ticket::done)) return PLAIT_ERR_TIMEOUT;
  if (message) *message = t->message.c_str();
  return t->result;
}

extern "C" int plait_mx_ticket_submitted(plait_mx_ticket_t *t, double timeout_s) {
  if (!t) return -1;
  std::unique_lock<std::mutex> lock(t->mu);
  if (!WaitFor(t, lock, timeout_s, &plait_mx_ticket::submitted)) return 0;
  return t->done && !t->handle ? 2 : 1;
}

extern "C" plait_handle_t *plait_mx_ticket_handle(plait_mx_ticket_t *t) {
  if (!t) return nullptr;
  std::lock_guard<std::mutex> lock(t->mu);
  return t->handle;
}

extern "C" void plait_mx_ticket_release(plait_mx_ticket_t *t) {
  if (t) Unref(t);
}

extern "C" const char *plait_mx_last_error(void) { return last_error.c_str(); }
