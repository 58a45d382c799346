/* Internal: the job secret read from a private file (PLAIT_SECRET_FILE). */
#ifndef PLAIT_SECRET_FILE_H
#define PLAIT_SECRET_FILE_H

#include "plait/plait.h"

/* Reads the first line of path (without its line break) into *out, a new
 * string the caller frees. Refuses, with PLAIT_ERR_CONFIG naming the file and
 * what is wrong, a file that cannot be opened, is not a regular file, is not
 * owned by this process's user, can be read or written by its group or by
 * others, or whose first line is empty. Any thread; blocks on the file only. */
plait_result_t plait_secret_file_read(const char *path, char **out);

#endif
