/* The operation calls of the public ABI: check every argument, build the
 * entries, hand them to the coordinator. Nothing is queued on any error. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/current.h"
#include "api/struct_size.h"
#include "util/error.h"
#include "engine/submit/handle.h"
#include "engine/transport/process_set.h"
#include "util/clock.h"
#include "plait/transport.h"
#include "engine/observe/timeline.h"

#define BAD(...) plait_error(PLAIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)

PLAIT_API plait_result_t plait_tensor_1d(plait_tensor_t *t, void *data, size_t count,
                                         plait_dtype_t dtype) {
  if (!t) return BAD("plait_tensor_1d: t is NULL");
  if (!plait_dtype_name(dtype)) return BAD("plait_tensor_1d: dtype %d is not a plait_dtype_t", dtype);
  if (count > (size_t)INT64_MAX) return BAD("plait_tensor_1d: count %zu is too large", count);
  memset(t, 0, PLAIT_TENSOR_SIZE_V1); /* the first layout: safe on any caller's struct */
  t->struct_size = PLAIT_TENSOR_SIZE_V1;
  t->data = data;
  t->dtype = dtype;
  t->device = PLAIT_DEVICE_HOST;
  t->ndim = 1;
  t->shape[0] = (int64_t)count;
  return PLAIT_SUCCESS;
}

static plait_result_t check_name(const char *fn, const char *name) {
  if (!name) return BAD("%s: name is NULL", fn);
  size_t n = strlen(name);
  if (n == 0) return BAD("%s: name is empty", fn);
  if (n > PLAIT_MAX_NAME) return BAD("%s: name is %zu bytes, the limit is %d", fn, n, PLAIT_MAX_NAME);
  if (!strncmp(name, "plait:", 6))
    return BAD("%s: name '%s': names starting with 'plait:' are reserved", fn, name);
  if (name[0] == '\x1f')
    return BAD("%s: a name may not start with the byte 0x1f (plait's process-set keys do)", fn);
  return PLAIT_SUCCESS;
}

/* Whether the transport takes t's memory: host memory needs
 * PLAIT_CAP_HOST_MEMORY, device memory PLAIT_CAP_DEVICE_MEMORY and, when the
 * plugin says which device its state is on (device()), that device. */
static plait_result_t check_memory(const char *fn, const plait_engine_t *e, const char *what,
                                   const char *name, const plait_tensor_t *t) {
  const plait_transport_t *tr = e->plugin.table;
  if (t->device == PLAIT_DEVICE_HOST) {
    if (tr->caps & PLAIT_CAP_HOST_MEMORY) return PLAIT_SUCCESS;
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s of '%s' is in host memory but transport "
                       "'%s' takes device memory only (pass a tensor in device memory, or choose "
                       "a transport for host memory with PLAIT_TRANSPORT, e.g. gloo)", fn, what,
                       name, tr->name);
  }
  if (!(tr->caps & PLAIT_CAP_DEVICE_MEMORY))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s of '%s' is on device %d but transport '%s' "
                       "takes host memory only (choose one with PLAIT_TRANSPORT, e.g. nccl)", fn,
                       what, name, t->device, tr->name);
  int mine = PLAIT_TRANSPORT_HAS(tr, device) ? tr->device(e->plugin.state) : -1;
  if (mine >= 0 && t->device != mine)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: %s of '%s' is on device %d but transport "
                       "'%s' runs on device %d on this rank (move the tensor to device %d, or "
                       "select device %d before plait_init)", fn, what, name, t->device, tr->name,
                       mine, mine, t->device);
  return PLAIT_SUCCESS;
}

/* Checks a tensor and fills the shared parts of meta. *tp is read (any size
 * from its first layout up) into copy and then points to it. */
static plait_result_t check_tensor(const char *fn, const plait_engine_t *e, const char *what,
                                   const char *name, const plait_tensor_t **tp,
                                   plait_tensor_t *copy, plait_meta_t *meta) {
  if (!*tp) return BAD("%s: %s is NULL", fn, what);
  PLAIT_CHECK(plait_tensor_read(fn, what, *tp, copy));
  const plait_tensor_t *t = *tp = copy;
  if (!plait_dtype_name(t->dtype)) return BAD("%s: %s->dtype %d is not a plait_dtype_t", fn, what, t->dtype);
  if (t->ndim < 0 || t->ndim > PLAIT_MAX_DIMS)
    return BAD("%s: %s->ndim %d is not in 0..%d", fn, what, t->ndim, PLAIT_MAX_DIMS);
  if (t->device < PLAIT_DEVICE_HOST)
    return BAD("%s: %s->device %d is not PLAIT_DEVICE_HOST (-1) or a device index", fn, what,
               t->device);
  int64_t count = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) return BAD("%s: %s->shape[%d] is %lld", fn, what, i, (long long)t->shape[i]);
    if (t->shape[i] && count > INT64_MAX / 16 / t->shape[i])
      return BAD("%s: %s has too many elements", fn, what);
    count *= t->shape[i];
  }
  if (count > 0 && !t->data) return BAD("%s: %s->data is NULL with %lld elements", fn, what, (long long)count);
  PLAIT_CHECK(check_memory(fn, e, what, name, t));
  memset(meta, 0, sizeof *meta);
  meta->dtype = (uint8_t)t->dtype;
  meta->ndim = (uint8_t)t->ndim;
  /* Announced and compared across ranks: host or device memory only. The
   * index is this rank's own (each rank of a job has its own device). */
  meta->device = t->device == PLAIT_DEVICE_HOST ? PLAIT_DEVICE_HOST : 0;
  memcpy(meta->shape, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
  meta->prescale = meta->postscale = 1.0;
  return PLAIT_SUCCESS;
}

/* The process set of opts: 0 when opts is NULL or its struct_size does not
 * reach the field (a caller built against the first layout). */
static int32_t opts_pset(const plait_op_options_t *opts) {
  if (!opts || opts->struct_size < offsetof(plait_op_options_t, process_set) +
                                       sizeof opts->process_set)
    return PLAIT_GLOBAL_PROCESS_SET;
  return opts->process_set;
}

/* The operation's process set: this rank must be a member. *n: its size. */
static plait_result_t check_pset(const char *fn, const plait_engine_t *e,
                                 const plait_op_options_t *opts, int *n, plait_meta_t *meta) {
  int32_t id = opts_pset(opts);
  if (id == PLAIT_GLOBAL_PROCESS_SET)
    *n = e->topo.size;
  else
    PLAIT_CHECK(plait_psets_check_member(e->psets, fn, id, n));
  meta->pset = id;
  return PLAIT_SUCCESS;
}

/* *opts (NULL or any size from its first layout up) is read over the
 * defaults into copy and then points to it. */
static plait_result_t check_common(const char *fn, const plait_engine_t *e,
                                   const plait_op_options_t **opts, plait_op_options_t *copy,
                                   plait_handle_t **handle) {
  if (!handle) return BAD("%s: handle is NULL", fn);
  PLAIT_CHECK(plait_op_options_read(fn, *opts, copy));
  *opts = copy;
  return plait_api_check(fn, e);
}

static plait_result_t check_reduction(const char *fn, const plait_engine_t *e,
                                      plait_dtype_t dtype, int device,
                                      plait_op_t op, const plait_op_options_t *opts,
                                      plait_meta_t *meta) {
  if (!plait_op_name(op)) return BAD("%s: op %d is not a plait_op_t", fn, op);
  if (dtype == PLAIT_BOOL && op == PLAIT_OP_AVERAGE)
    return BAD("%s: AVERAGE is not defined for bool (use SUM or MAX for a logical OR)", fn);
  double pre = opts ? opts->prescale_factor : 1.0, post = opts ? opts->postscale_factor : 1.0;
  if (!isfinite(pre) || !isfinite(post))
    return BAD("%s: prescale_factor %g and postscale_factor %g must be finite", fn, pre, post);
  if ((pre != 1.0 || post != 1.0) && dtype == PLAIT_BOOL)
    return BAD("%s: scale factors are not defined for bool", fn);
  if ((pre != 1.0 || post != 1.0 || op == PLAIT_OP_AVERAGE) && device != PLAIT_DEVICE_HOST &&
      !PLAIT_TRANSPORT_HAS(e->plugin.table, batch_copy))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s on device memory needs a transport that "
                       "scales there (batch_copy), and transport '%s' does not; use SUM and "
                       "scale on the device", fn, op == PLAIT_OP_AVERAGE ? "AVERAGE" :
                       "a scale factor", e->plugin.table->name);
  meta->op = (uint8_t)op;
  meta->prescale = pre;
  meta->postscale = post;
  return PLAIT_SUCCESS;
}

/* The collectives whose output plait allocates: on device memory they need
 * the transport's batch_copy (transport.h: a device plugin without it gets
 * unfused in-place operations only). */
static plait_result_t check_device_output(const char *fn, const plait_engine_t *e,
                                          const plait_tensor_t *input) {
  if (input->device == PLAIT_DEVICE_HOST || PLAIT_TRANSPORT_HAS(e->plugin.table, batch_copy))
    return PLAIT_SUCCESS;
  return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: input is on device %d and transport '%s' has "
                     "no batch_copy, which plait needs to fill an output it allocates in device "
                     "memory (use allreduce, or a transport with batch_copy)", fn, input->device,
                     e->plugin.table->name);
}

/* The entry and its name in one block (plait_entry_free knows it): one
 * allocation per submitted tensor fewer. */
static plait_entry_t *new_entry(const char *name, const plait_meta_t *meta) {
  size_t len = name ? strlen(name) + 1 : 0;
  plait_entry_t *e = calloc(1, sizeof *e + len);
  if (!e) return NULL;
  e->meta = *meta;
  if (name) e->name = memcpy((char *)(e + 1), name, len);
  e->submitted_at = plait_now();
  return e;
}

/* Submits n entries under one new handle; frees everything on failure. */
static plait_result_t submit_as(const char *fn, plait_engine_t *e, plait_entry_t **es, int n,
                                plait_coll_t coll, const plait_op_options_t *opts,
                                plait_handle_t **handle) {
  plait_handle_t *h = plait_handle_new(coll, n, opts);
  plait_result_t rc = h ? PLAIT_SUCCESS
                        : plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory for the "
                                      "operation's handle (%d tensors)", fn, n);
  for (int i = 0; i < n && rc == PLAIT_SUCCESS; i++) {
    if (!es[i])
      rc = plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory for tensor %d of %d", fn, i, n);
    else es[i]->handle = h, es[i]->index = i, es[i]->stream = opts ? opts->stream : NULL;
  }
  if (rc == PLAIT_SUCCESS && (rc = plait_engine_submit(e, es, n)) != PLAIT_SUCCESS &&
      strncmp(plait_last_error(), fn, strlen(fn)))
    plait_error_context(rc, "%s", fn);
  if (rc != PLAIT_SUCCESS) {
    for (int i = 0; i < n; i++) plait_entry_free(es[i]);
    if (h) {
      plait_handle_abandon(h);
      plait_release(h);
    }
    return rc;
  }
  *handle = h; /* the entries belong to the coordinator now */
  return PLAIT_SUCCESS;
}

#define submit(es, n, coll, opts, handle) submit_as(fn, engine, es, n, coll, opts, handle)

static plait_result_t same_shape(const char *fn, const plait_tensor_t *in, const plait_tensor_t *out) {
  if (in->dtype != out->dtype)
    return BAD("%s: output dtype %s differs from input dtype %s", fn, plait_dtype_name(out->dtype),
               plait_dtype_name(in->dtype));
  if (in->device != out->device)
    return BAD("%s: output is on device %d, input on device %d", fn, out->device, in->device);
  int64_t a = 1, b = 1;
  for (int i = 0; i < in->ndim; i++) a *= in->shape[i];
  for (int i = 0; i < out->ndim; i++) b *= out->shape[i];
  if (a != b) return BAD("%s: output has %lld elements, input %lld", fn, (long long)b, (long long)a);
  return PLAIT_SUCCESS;
}

/* Builds one allreduce entry (shared by the single and grouped calls). */
static plait_result_t allreduce_entry(const char *fn, const plait_engine_t *engine,
                                      const char *name, const plait_tensor_t *in,
                                      const plait_tensor_t *out, plait_op_t op,
                                      const plait_op_options_t *opts, plait_entry_t **e) {
  plait_meta_t meta, ometa;
  plait_tensor_t tin, tout;
  PLAIT_CHECK(check_name(fn, name));
  PLAIT_CHECK(check_tensor(fn, engine, "input", name, &in, &tin, &meta));
  PLAIT_CHECK(check_tensor(fn, engine, "output", name, &out, &tout, &ometa));
  PLAIT_CHECK(same_shape(fn, in, out));
  if (in->device != PLAIT_DEVICE_HOST && in->data != out->data &&
      !PLAIT_TRANSPORT_HAS(engine->plugin.table, batch_copy))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: '%s' is in device memory and out of place, "
                       "but transport '%s' has no batch_copy to copy it there (pass the same "
                       "tensor as input and output)", fn, name, engine->plugin.table->name);
  PLAIT_CHECK(check_reduction(fn, engine, in->dtype, in->device, op, opts, &meta));
  int members;
  PLAIT_CHECK(check_pset(fn, engine, opts, &members, &meta));
  meta.coll = PLAIT_COLL_ALLREDUCE;
  *e = new_entry(name, &meta);
  if (*e) (*e)->input = *in, (*e)->output = *out;
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_allreduce_async(const char *name, const plait_tensor_t *input,
                                               const plait_tensor_t *output, plait_op_t op,
                                               const plait_op_options_t *opts,
                                               plait_handle_t **handle) {
  static const char fn[] = "plait_allreduce_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_entry_t *e = NULL;
  PLAIT_CHECK(allreduce_entry(fn, engine, name, input, output, op, opts, &e));
  return submit(&e, 1, PLAIT_COLL_ALLREDUCE, opts, handle);
}

PLAIT_API plait_result_t plait_grouped_allreduce_async(size_t count, const char *const *names,
                                                       const plait_tensor_t *inputs,
                                                       const plait_tensor_t *outputs,
                                                       plait_op_t op,
                                                       const plait_op_options_t *opts,
                                                       plait_handle_t **handle) {
  static const char fn[] = "plait_grouped_allreduce_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  if (count == 0 || count > 1000000) return BAD("%s: count %zu is not in 1..1000000", fn, count);
  if (!names || !inputs || !outputs)
    return BAD("%s: %s is NULL", fn, !names ? "names" : !inputs ? "inputs" : "outputs");
  plait_entry_t **es = calloc(count, sizeof *es);
  if (!es) return plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory for a group of %zu", fn, count);
  plait_result_t rc = PLAIT_SUCCESS;
  /* A group is known by its smallest member name, so ranks may list the
   * members in any order. */
  const char *key = NULL;
  for (size_t i = 0; i < count; i++)
    if (names[i] && (!key || strcmp(names[i], key) < 0)) key = names[i];
  for (size_t i = 0; i < count && rc == PLAIT_SUCCESS; i++) {
    /* the arrays' stride is member 0's struct_size, checked with member 0 */
    if (i == 0 || (!(rc = plait_tensor_member_check(fn, "input", inputs, i)) &&
                   !(rc = plait_tensor_member_check(fn, "output", outputs, i))))
      rc = allreduce_entry(fn, engine, names[i], plait_tensor_at(inputs, i),
                           plait_tensor_at(outputs, i), op, opts, &es[i]);
    if (rc) plait_error_context(rc, "member %zu", i);
    else if (es[i] && !(es[i]->meta.group = strdup(key)))
      rc = plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory for member %zu ('%s')", fn, i,
                       names[i] ? names[i] : "(unnamed)");
    if (es[i]) es[i]->meta.group_size = (uint32_t)count;
  }
  if (rc == PLAIT_SUCCESS) rc = submit(es, (int)count, PLAIT_COLL_ALLREDUCE, opts, handle);
  else
    for (size_t i = 0; i < count; i++) plait_entry_free(es[i]);
  free(es);
  return rc;
}

PLAIT_API plait_result_t plait_allgather_async(const char *name, const plait_tensor_t *input,
                                               const plait_op_options_t *opts,
                                               plait_handle_t **handle) {
  static const char fn[] = "plait_allgather_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_meta_t meta;
  PLAIT_CHECK(check_name(fn, name));
  plait_tensor_t tin;
  PLAIT_CHECK(check_tensor(fn, engine, "input", name, &input, &tin, &meta));
  if (input->ndim < 1) return BAD("%s: input is a scalar; allgather needs a first dimension", fn);
  PLAIT_CHECK(check_device_output(fn, engine, input));
  int members;
  PLAIT_CHECK(check_pset(fn, engine, opts, &members, &meta));
  meta.coll = PLAIT_COLL_ALLGATHER;
  plait_entry_t *e = new_entry(name, &meta);
  if (e) e->input = *input;
  return submit(&e, 1, PLAIT_COLL_ALLGATHER, opts, handle);
}

PLAIT_API plait_result_t plait_broadcast_async(const char *name, const plait_tensor_t *tensor,
                                               int root, const plait_op_options_t *opts,
                                               plait_handle_t **handle) {
  static const char fn[] = "plait_broadcast_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_meta_t meta;
  PLAIT_CHECK(check_name(fn, name));
  plait_tensor_t tt;
  PLAIT_CHECK(check_tensor(fn, engine, "tensor", name, &tensor, &tt, &meta));
  int size = engine->topo.size, members;
  if (root < 0 || root >= size) return BAD("%s: root %d is not a rank of this job of %d", fn, root, size);
  PLAIT_CHECK(check_pset(fn, engine, opts, &members, &meta));
  if (meta.pset && plait_psets_contains(engine->psets, meta.pset, root) != 1)
    return BAD("%s: root %d is not a member of process set %d (a root is a rank of the job, as "
               "in Horovod)", fn, root, meta.pset);
  meta.coll = PLAIT_COLL_BROADCAST;
  meta.root = root;
  plait_entry_t *e = new_entry(name, &meta);
  if (e) e->input = e->output = *tensor;
  return submit(&e, 1, PLAIT_COLL_BROADCAST, opts, handle);
}

PLAIT_API plait_result_t plait_alltoall_async(const char *name, const plait_tensor_t *input,
                                              const int64_t *splits,
                                              const plait_op_options_t *opts,
                                              plait_handle_t **handle) {
  static const char fn[] = "plait_alltoall_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_meta_t meta;
  PLAIT_CHECK(check_name(fn, name));
  plait_tensor_t tin;
  PLAIT_CHECK(check_tensor(fn, engine, "input", name, &input, &tin, &meta));
  if (input->ndim < 1) return BAD("%s: input is a scalar; alltoall needs a first dimension", fn);
  PLAIT_CHECK(check_device_output(fn, engine, input));
  int size;
  PLAIT_CHECK(check_pset(fn, engine, opts, &size, &meta));
  int64_t rows = input->shape[0], sum = 0;
  if (!splits && rows % size)
    return BAD("%s: splits is NULL but the first dimension %lld does not divide by %d ranks", fn,
               (long long)rows, size);
  meta.coll = PLAIT_COLL_ALLTOALL;
  meta.nsplits = (uint32_t)size;
  meta.splits = malloc(sizeof(int64_t) * (size_t)size);
  if (!meta.splits)
    return plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory for the %d splits of '%s'", fn, size,
                       name ? name : "(unnamed)");
  for (int r = 0; r < size; r++) {
    meta.splits[r] = splits ? splits[r] : rows / size;
    if (meta.splits[r] < 0) {
      free(meta.splits);
      return BAD("%s: splits[%d] is %lld", fn, r, (long long)splits[r]);
    }
    sum += meta.splits[r];
  }
  if (sum != rows) {
    free(meta.splits);
    return BAD("%s: splits add up to %lld rows but the input has %lld", fn, (long long)sum,
               (long long)rows);
  }
  plait_entry_t *e = new_entry(name, &meta);
  if (e) e->input = *input;
  else free(meta.splits);
  return submit(&e, 1, PLAIT_COLL_ALLTOALL, opts, handle);
}

PLAIT_API plait_result_t plait_reducescatter_async(const char *name, const plait_tensor_t *input,
                                                   plait_op_t op, const plait_op_options_t *opts,
                                                   plait_handle_t **handle) {
  static const char fn[] = "plait_reducescatter_async";
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_meta_t meta;
  PLAIT_CHECK(check_name(fn, name));
  plait_tensor_t tin;
  PLAIT_CHECK(check_tensor(fn, engine, "input", name, &input, &tin, &meta));
  if (input->ndim < 1) return BAD("%s: input is a scalar; reducescatter needs a first dimension", fn);
  PLAIT_CHECK(check_device_output(fn, engine, input));
  PLAIT_CHECK(check_reduction(fn, engine, input->dtype, input->device, op, opts, &meta));
  int members;
  PLAIT_CHECK(check_pset(fn, engine, opts, &members, &meta));
  meta.coll = PLAIT_COLL_REDUCESCATTER;
  plait_entry_t *e = new_entry(name, &meta);
  if (e) e->input = *input;
  return submit(&e, 1, PLAIT_COLL_REDUCESCATTER, opts, handle);
}

static plait_result_t nameless(const char *fn, plait_coll_t coll, const plait_op_options_t *opts,
                               plait_handle_t **handle) {
  PLAIT_API_ENGINE(engine);
  plait_op_options_t o;
  PLAIT_CHECK(check_common(fn, engine, &opts, &o, handle));
  plait_meta_t meta;
  memset(&meta, 0, sizeof meta);
  meta.coll = (uint8_t)coll;
  meta.device = PLAIT_DEVICE_HOST;
  meta.prescale = meta.postscale = 1.0;
  int members;
  PLAIT_CHECK(check_pset(fn, engine, opts, &members, &meta));
  if (coll == PLAIT_COLL_JOIN && meta.pset)
    return BAD("%s: join runs on the global process set only (as Horovod's join); opts->"
               "process_set is %d", fn, meta.pset);
  char name[64];
  if (meta.pset) /* the table names the global set's barriers; a set's count here */
    snprintf(name, sizeof name, "plait:barrier.%d.%llu", (int)meta.pset,
             (unsigned long long)plait_psets_next_barrier(engine->psets, meta.pset));
  plait_entry_t *e = new_entry(meta.pset ? name : NULL, &meta);
  return submit(&e, 1, coll, opts, handle);
}

PLAIT_API plait_result_t plait_barrier_async(const plait_op_options_t *opts, plait_handle_t **handle) {
  return nameless("plait_barrier_async", PLAIT_COLL_BARRIER, opts, handle);
}

PLAIT_API plait_result_t plait_join_async(const plait_op_options_t *opts, plait_handle_t **handle) {
  return nameless("plait_join_async", PLAIT_COLL_JOIN, opts, handle);
}
