// batch_copy's kernel: one launch for many spans (kernels.h). Blocks walk
// chunks of NC_CHUNK_BYTES (elem.h) grid-strided; each finds its span by
// binary search over the staged table, then copies, scales or fills its
// chunk with 16-byte loads and stores where both pointers are 16-byte
// aligned, element by element otherwise and for the tail. The arithmetic is
// elem.h's, shared with the C unit test; compiled with -fmad=false. The same
// kernel divides (AVERAGE after a SUM) when given a divisor.
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 65536;

// Scalers: T the element type, apply one element.
struct CopyBytes {};
#define NC_SCALER(NAME, T, EXPR)                                                     \
  struct NAME {                                                                      \
    typedef T type;                                                                  \
    __device__ static T apply(T x, double p, float pf) { (void)p; (void)pf; return EXPR; } \
  };
NC_SCALER(ScaleU8, uint8_t, nc_scale_u8(x, p))
NC_SCALER(ScaleI8, int8_t, nc_scale_i8(x, p))
NC_SCALER(ScaleU16, uint16_t, nc_scale_u16(x, p))
NC_SCALER(ScaleI16, int16_t, nc_scale_i16(x, p))
NC_SCALER(ScaleI32, int32_t, nc_scale_i32(x, p))
NC_SCALER(ScaleI64, int64_t, nc_scale_i64(x, p))
NC_SCALER(ScaleF16, uint16_t, nc_scale_f16(x, pf))
NC_SCALER(ScaleBF16, uint16_t, nc_scale_bf16(x, pf))
NC_SCALER(ScaleF32, float, nc_scale_f32(x, pf))
NC_SCALER(ScaleF64, double, nc_scale_f64(x, p))
// Dividers (AVERAGE): p holds the divisor.
NC_SCALER(DivU8, uint8_t, nc_div_u8(x, (uint32_t)p))
NC_SCALER(DivI8, int8_t, nc_div_i8(x, (uint32_t)p))
NC_SCALER(DivU16, uint16_t, nc_div_u16(x, (uint32_t)p))
NC_SCALER(DivI16, int16_t, nc_div_i16(x, (uint32_t)p))
NC_SCALER(DivI32, int32_t, nc_div_i32(x, (uint32_t)p))
NC_SCALER(DivI64, int64_t, nc_div_i64(x, (uint32_t)p))
NC_SCALER(DivF16, uint16_t, nc_div_f16(x, (uint32_t)p))
NC_SCALER(DivBF16, uint16_t, nc_div_bf16(x, (uint32_t)p))
NC_SCALER(DivF32, float, nc_div_f32(x, (uint32_t)p))
NC_SCALER(DivF64, double, nc_div_f64(x, (uint32_t)p))
#undef NC_SCALER

__device__ bool aligned16(uint64_t a, uint64_t b) { return ((a | b) & 15u) == 0; }

// Words of W bytes from s to d (both W-aligned), len a multiple of W.
template <typename W>
__device__ void copy_words(char *d, const char *s, uint64_t len) {
  W *dw = reinterpret_cast<W *>(d);
  const W *sw = reinterpret_cast<const W *>(s);
  for (uint64_t i = threadIdx.x; i < len / sizeof(W); i += blockDim.x) dw[i] = sw[i];
}

__device__ void copy_bytes(char *d, const char *s, uint64_t len) {
  uint64_t a = (uint64_t)d | (uint64_t)s;
  uint64_t head = 0;
  if ((a & 15u) == 0) {
    head = len & ~(uint64_t)15;
    copy_words<uint4>(d, s, head);
  } else if ((a & 7u) == 0) {
    head = len & ~(uint64_t)7;
    copy_words<uint2>(d, s, head);
  } else if ((a & 3u) == 0) {
    head = len & ~(uint64_t)3;
    copy_words<uint32_t>(d, s, head);
  }
  for (uint64_t i = head + threadIdx.x; i < len; i += blockDim.x) d[i] = s[i];
}

// The element bits `fill` (es bytes) repeated over len bytes (a multiple of es).
template <typename E>
__device__ void fill_elems(char *d, uint64_t len, uint64_t fill, uint64_t from) {
  E *de = reinterpret_cast<E *>(d);
  const E v = (E)fill;
  for (uint64_t i = from / sizeof(E) + threadIdx.x; i < len / sizeof(E); i += blockDim.x) de[i] = v;
}

__device__ void fill_bytes(char *d, uint64_t len, uint64_t fill, unsigned es) {
  const uint64_t pattern = nc_fill_pattern(fill, es);
  uint64_t head = 0;
  if (((uint64_t)d & 15u) == 0) {
    head = len & ~(uint64_t)15;
    uint4 v = make_uint4((uint32_t)pattern, (uint32_t)(pattern >> 32), (uint32_t)pattern,
                         (uint32_t)(pattern >> 32));
    uint4 *dw = reinterpret_cast<uint4 *>(d);
    for (uint64_t i = threadIdx.x; i < head / 16; i += blockDim.x) dw[i] = v;
  }
  switch (es) {
    case 1: fill_elems<uint8_t>(d, len, fill, head); break;
    case 2: fill_elems<uint16_t>(d, len, fill, head); break;
    case 4: fill_elems<uint32_t>(d, len, fill, head); break;
    default: fill_elems<uint64_t>(d, len, fill, head); break;
  }
}

template <typename S>
__device__ void scale_elems(char *d, const char *s, uint64_t len, double p, float pf) {
  typedef typename S::type T;
  constexpr int kPer = 16 / sizeof(T);
  uint64_t head = 0;
  if (aligned16((uint64_t)d, (uint64_t)s)) {
    head = len & ~(uint64_t)15;
    uint4 *dw = reinterpret_cast<uint4 *>(d);
    const uint4 *sw = reinterpret_cast<const uint4 *>(s);
    for (uint64_t i = threadIdx.x; i < head / 16; i += blockDim.x) {
      union {
        uint4 v;
        T e[kPer];
      } u;
      u.v = sw[i];
#pragma unroll
      for (int k = 0; k < kPer; k++) u.e[k] = S::apply(u.e[k], p, pf);
      dw[i] = u.v;
    }
  }
  T *de = reinterpret_cast<T *>(d);
  const T *se = reinterpret_cast<const T *>(s);
  for (uint64_t i = head / sizeof(T) + threadIdx.x; i < len / sizeof(T); i += blockDim.x)
    de[i] = S::apply(se[i], p, pf);
}

template <typename S>
__device__ void chunk_work(char *d, const char *s, uint64_t len, double p, float pf) {
  scale_elems<S>(d, s, len, p, pf);
}
template <>
__device__ void chunk_work<CopyBytes>(char *d, const char *s, uint64_t len, double, float) {
  if (d != s) copy_bytes(d, s, len);
}

template <typename S>
__global__ void __launch_bounds__(kThreads)
    batch_kernel(const nc_span_ent_t *tab, uint32_t n, uint64_t chunks, unsigned es, double p,
                 float pf, uint64_t fill) {
  for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    uint32_t i;
    uint64_t off, len;
    nc_chunk_range(tab, n, c, &i, &off, &len);
    const nc_span_ent_t e = tab[i];
    char *d = reinterpret_cast<char *>(e.dst) + off;
    if (e.src == 0)
      fill_bytes(d, len, fill, es);
    else
      chunk_work<S>(d, reinterpret_cast<const char *>(e.src) + off, len, p, pf);
  }
}

template <typename S>
cudaError_t launch(const nc_span_ent_t *tab, uint32_t n, uint64_t chunks, unsigned es,
                   double p, uint64_t fill, cudaStream_t stream) {
  const unsigned blocks = (unsigned)(chunks < kMaxBlocks ? chunks : kMaxBlocks);
  batch_kernel<S><<<blocks, kThreads, 0, stream>>>(tab, n, chunks, es, p, (float)p, fill);
  return cudaGetLastError();
}

} // namespace

static cudaError_t launch_divide(const nc_span_ent_t *tab, uint32_t n, uint64_t chunks,
                                 int dtype, unsigned es, uint32_t d, cudaStream_t stream) {
  const double p = (double)d;
  switch (dtype) {
    case PLAIT_UINT8: return launch<DivU8>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_INT8: return launch<DivI8>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_UINT16: return launch<DivU16>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_INT16: return launch<DivI16>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_INT32: return launch<DivI32>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_INT64: return launch<DivI64>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_FLOAT16: return launch<DivF16>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_BFLOAT16: return launch<DivBF16>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_FLOAT32: return launch<DivF32>(tab, n, chunks, es, p, 0, stream);
    case PLAIT_FLOAT64: return launch<DivF64>(tab, n, chunks, es, p, 0, stream);
    default: return cudaErrorInvalidValue; // bool has no average
  }
}

extern "C" cudaError_t nc_launch_batch(const nc_span_ent_t *tab, uint32_t n, uint64_t chunks,
                                       int dtype, double factor, uint32_t divisor,
                                       uint64_t fill, cudaStream_t stream) {
  (void)cudaGetLastError(); // an earlier call's error must not read as the launch's
  if (chunks == 0) return cudaSuccess;
  static const unsigned sizes[] = {1, 1, 2, 2, 4, 8, 2, 2, 4, 8, 1};
  if (dtype < 0 || dtype > PLAIT_BOOL) return cudaErrorInvalidValue;
  const unsigned es = sizes[dtype];
  if (divisor) return launch_divide(tab, n, chunks, dtype, es, divisor, stream);
  if (factor == 1.0) return launch<CopyBytes>(tab, n, chunks, es, factor, fill, stream);
  switch (dtype) {
    case PLAIT_UINT8: return launch<ScaleU8>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_INT8: return launch<ScaleI8>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_UINT16: return launch<ScaleU16>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_INT16: return launch<ScaleI16>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_INT32: return launch<ScaleI32>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_INT64: return launch<ScaleI64>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_FLOAT16: return launch<ScaleF16>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_BFLOAT16: return launch<ScaleBF16>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_FLOAT32: return launch<ScaleF32>(tab, n, chunks, es, factor, fill, stream);
    case PLAIT_FLOAT64: return launch<ScaleF64>(tab, n, chunks, es, factor, fill, stream);
    default: return cudaErrorInvalidValue; // bool is never scaled (batch.c refuses it)
  }
}
