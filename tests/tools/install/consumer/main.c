/* A program built against an installed plait. */
#include <plait/dtypes.h>
#include <plait/plait.h>
#include <stdio.h>

int main(void) {
  if (plait_init() != PLAIT_SUCCESS) {
    fprintf(stderr, "consumer: %s\n", plait_last_error());
    return 1;
  }
  int rank = -1, size = -1;
  const char *transport = "?";
  plait_rank(&rank);
  plait_size(&size);
  plait_transport_name(&transport);
  printf("consumer: rank %d of %d over %s\n", rank, size, transport);
  if (plait_dtype_size_inline(PLAIT_FLOAT32) != plait_dtype_size(PLAIT_FLOAT32)) return 1;
  return plait_shutdown() == PLAIT_SUCCESS ? 0 : 1;
}
