/*
 * hello: every rank joins the job and prints what it sees.
 *
 *   plaitrun -np 4 build/bin/hello
 *
 * A first check that ranks find each other, prove they belong to the job and
 * load the transport: one line per rank with rank, size, local and cross
 * values and the transport's name. plait_shutdown waits for every rank.
 */
#define _POSIX_C_SOURCE 200809L
#include <plait/plait.h>
#include <stdio.h>
#include <unistd.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) {                                                \
      fprintf(stderr, "hello: %s failed: %s: %s\n", #call,                     \
              plait_result_name(rc_), plait_last_error());                     \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  CHECK(plait_init());
  int rank, size, local_rank, local_size, cross_rank, cross_size;
  const char *transport;
  CHECK(plait_rank(&rank));
  CHECK(plait_size(&size));
  CHECK(plait_local_rank(&local_rank));
  CHECK(plait_local_size(&local_size));
  CHECK(plait_cross_rank(&cross_rank));
  CHECK(plait_cross_size(&cross_size));
  CHECK(plait_transport_name(&transport));
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  printf("hello from rank %d of %d: local %d/%d, cross %d/%d, host %s, transport %s, plait %s\n",
         rank, size, local_rank, local_size, cross_rank, cross_size, host, transport,
         plait_version_string());
  CHECK(plait_shutdown());
  return 0;
}
