/* Every operation of the C ABI in a job (tests/harness/every_op.c). */
#ifndef PLAIT_TEST_EVERY_OP_H
#define PLAIT_TEST_EVERY_OP_H

/* Runs every operation a few rounds on this rank of a job of size ranks
 * (size <= 16) and checks the results; 0 when all was right, else 1 with a
 * line on stderr. */
int every_op(int rank, int size);

#endif
