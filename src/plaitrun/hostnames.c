#include "hostnames.h"

#include "options.h"

#include <ctype.h>
#include <string.h>
#include <unistd.h>

int plaitrun_is_this_host(const char *name) {
  if (!strcmp(name, "localhost") || !strncmp(name, "127.", 4) || !strcmp(name, "::1") ||
      !strcmp(name, "localhost.localdomain"))
    return 1;
  char me[256];
  if (gethostname(me, sizeof me) != 0) return 0;
  me[sizeof me - 1] = '\0';
  if (!strcmp(name, me)) return 1;
  size_t short_len = strcspn(me, ".");
  return strlen(name) == short_len && !strncmp(name, me, short_len);
}

int plaitrun_valid_host_name(const char *name) {
  if (!name[0] || name[0] == '-' || strlen(name) >= PLAITRUN_HOST_NAME_MAX) return 0;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr(".-_:[]", *c)) return 0;
  return 1;
}
