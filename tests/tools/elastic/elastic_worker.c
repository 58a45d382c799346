/*
 * A tiny elastic worker for plaitrun's end-to-end elastic test (e2e.sh):
 * plait_init asks the driver for a place; then it allreduces a 1 every
 * 50 ms and checks the sum is the job's size. A failed step (a peer lost),
 * or host updates from the driver: shutdown and init again, which re-joins
 * the driver for the next epoch.
 * Answered STOP (plait_elastic_removed): prints the reason, exits 0. It ends
 * with status 0 once the file named by argv[1] exists.
 */
#include <plait/elastic.h>
#include <plait/plait.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One job: steps until a step fails or the hosts changed (returns 1) or done
 * appears (returns 0). Each step sums {1, rank 0's host updates}: every rank
 * learns of a host change in the same step, as Horovod's State.commit(). */
static int train(const char *done, int rank, int size) {
  for (long step = 0;; step++) {
    float x[2] = {1, 0};
    uint64_t timestamp = 0;
    unsigned update = 0;
    if (rank == 0 && plait_elastic_host_updates(&timestamp, &update) == PLAIT_SUCCESS)
      x[1] = (float)update;
    plait_tensor_t t;
    plait_handle_t *h = NULL;
    plait_result_t rc = plait_tensor_1d(&t, x, 2, PLAIT_FLOAT32);
    if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("x", &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h, -1);
    if (h) plait_release(h);
    if (rc != PLAIT_SUCCESS) {
      printf("step %ld failed: %s: %s\n", step, plait_result_name(rc), plait_last_error());
      return 1;
    }
    if (x[0] != (float)size) {
      printf("step %ld: sum %g, expected %d\n", step, x[0], size);
      exit(3);
    }
    if (x[1] != 0) {
      printf("step %ld: hosts changed (update %g): re-forming\n", step, x[1]);
      return 1;
    }
    if (done && access(done, F_OK) == 0) return 0;
    usleep(50 * 1000);
  }
}

int main(int argc, char **argv) {
  const char *done = argc > 1 ? argv[1] : NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int round = 0; round < 100; round++) {
    plait_result_t rc = plait_init();
    if (rc != PLAIT_SUCCESS) {
      int removed = 0;
      plait_elastic_removed(&removed);
      printf("%s: %s: %s\n", removed ? "removed" : "init failed", plait_result_name(rc),
             plait_last_error());
      return removed ? 0 : 1;
    }
    uint64_t epoch = 0;
    int rank = -1, size = 0;
    plait_elastic_epoch(&epoch);
    plait_rank(&rank);
    plait_size(&size);
    printf("epoch %llu rank %d size %d pid %d\n", (unsigned long long)epoch, rank, size,
           (int)getpid());
    int again = train(done, rank, size);
    plait_shutdown();
    if (!again) return 0;
  }
  return 2;
}
