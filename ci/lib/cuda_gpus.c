/*
 * How many GPUs CUDA itself sees here, for ci/device-test: the driver API's
 * cuDeviceGetCount through libcuda.so.1 opened with dlopen, so it builds
 * with a plain C compiler and runs where there is no driver at all.
 *
 *   cc -o cuda_gpus ci/lib/cuda_gpus.c -ldl && ./cuda_gpus
 *
 * Prints the count on stdout and one line saying how it knows on stderr.
 * Exit 0: the count is known (0 without a driver library or with
 * CUDA_ERROR_NO_DEVICE); exit 1: the driver is there but failed otherwise
 * (cuInit's error code printed), and 0 is printed.
 */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_count_fn)(int *count);
typedef int (*cu_error_fn)(int error, const char **text);

enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };

static const char *error_text(void *lib, int error) {
  const char *text = NULL;
  cu_error_fn str = (cu_error_fn)dlsym(lib, "cuGetErrorString");
  if (str == NULL || str(error, &text) != CUDA_SUCCESS || text == NULL) return "unknown error";
  return text;
}

int main(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    printf("0\n");
    fprintf(stderr, "cuda_gpus: no CUDA driver here (dlopen libcuda.so.1: %s)\n", dlerror());
    return 0;
  }
  cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
  cu_count_fn count_fn = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
  if (init == NULL || count_fn == NULL) {
    printf("0\n");
    fprintf(stderr, "cuda_gpus: libcuda.so.1 has no cuInit or cuDeviceGetCount\n");
    return 1;
  }
  int rc = init(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    printf("0\n");
    fprintf(stderr, "cuda_gpus: cuInit: no CUDA device (%s)\n", error_text(lib, rc));
    return 0;
  }
  int count = 0;
  if (rc == CUDA_SUCCESS) rc = count_fn(&count);
  if (rc != CUDA_SUCCESS) {
    printf("0\n");
    fprintf(stderr, "cuda_gpus: the CUDA driver failed: error %d (%s)\n", rc, error_text(lib, rc));
    return 1;
  }
  printf("%d\n", count);
  fprintf(stderr, "cuda_gpus: cuDeviceGetCount: %d\n", count);
  return 0;
}
