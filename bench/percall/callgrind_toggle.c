/* bench/percall/callgrind_toggle.c: callgrind's start/stop of instrumentation
 * as plain functions, for Python (ctypes) under valgrind --instr-atstart=no:
 * bench/percall_instructions.sh counts plait.torch's calls without the
 * minutes that importing torch takes when instrumented. Outside valgrind the
 * client requests do nothing. */
#include <valgrind/callgrind.h>

void percall_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void percall_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
