#include "gauges.h"

#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Allowances (gauges.h): memory in KiB. */
#define RSS_SLACK_KIB (64 * 1024)
#define HEAP_SLACK_KIB 128

static long count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  long n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Entries of /dev/shm named after this pid (libfabric shm), plus other
 * /dev/shm files this process has mapped (/proc/self/maps). */
static long count_shm(void) {
  char prefix[32];
  int pn = snprintf(prefix, sizeof prefix, "%d:", (int)getpid());
  long n = 0;
  DIR *d = opendir("/dev/shm");
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, prefix, (size_t)pn) == 0) n++;
  closedir(d);
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return n;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, " /dev/shm/");
    if (p && strncmp(p + 10, prefix, (size_t)pn) != 0) n++;
  }
  fclose(f);
  return n;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

void gauges_read(gauges_t *g) {
  long fds = count_dir("/proc/self/fd");
  g->fds = fds < 0 ? -1 : fds - 1; /* the directory's own descriptor */
  g->threads = count_dir("/proc/self/task");
  g->shm = count_shm();
  malloc_trim(0); /* free memory the allocator keeps in its arenas is not a leak */
  g->rss_kib = rss_kib();
  struct mallinfo2 mi = mallinfo2();
  g->heap_kib = (long)((mi.uordblks + mi.hblkhd) / 1024);
}

void gauges_format(const gauges_t *g, char *buf, size_t len) {
  snprintf(buf, len, "fds %ld threads %ld shm %ld rss %ld KiB heap %ld KiB", g->fds,
           g->threads, g->shm, g->rss_kib, g->heap_kib);
}

int gauges_grew(const gauges_t *first, const gauges_t *last, long extra_heap_kib, char *why,
                size_t len) {
  struct {
    const char *name;
    long a, b, slack;
  } rows[] = {{"fds", first->fds, last->fds, 0},
              {"threads", first->threads, last->threads, 0},
              {"/dev/shm entries", first->shm, last->shm, 0},
              {"RSS (KiB)", first->rss_kib, last->rss_kib, RSS_SLACK_KIB},
              {"heap (KiB)", first->heap_kib, last->heap_kib, HEAP_SLACK_KIB + extra_heap_kib}};
  int bad = 0;
  size_t o = 0;
  if (len) why[0] = '\0';
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int unread = rows[i].a < 0 || rows[i].b < 0;
    if (!unread && rows[i].b - rows[i].a <= rows[i].slack) continue;
    bad++;
    int k = unread ? snprintf(why + o, len - o, "%s%s could not be read", o ? "; " : "",
                              rows[i].name)
                   : snprintf(why + o, len - o, "%s%s grew from %ld to %ld (allowance %ld)",
                              o ? "; " : "", rows[i].name, rows[i].a, rows[i].b, rows[i].slack);
    if (k > 0 && (size_t)k < len - o) o += (size_t)k;
  }
  return bad;
}

void gauges_print_rss_maps(FILE *out, int n) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  struct {
    long kib;
    char name[160];
  } top[16] = {{0, ""}};
  if (n > 16) n = 16;
  char line[512], name[160] = "";
  while (fgets(line, sizeof line, f)) {
    long kib;
    if (sscanf(line, "Rss: %ld kB", &kib) == 1) {
      for (int i = 0; i < n; i++) {
        if (kib <= top[i].kib) continue;
        memmove(&top[i + 1], &top[i], (size_t)(n - 1 - i) * sizeof top[0]);
        top[i].kib = kib;
        snprintf(top[i].name, sizeof top[i].name, "%s", name);
        break;
      }
    } else if (strchr(line, '-') && strchr(line, ' ') && line[0] != ' ' &&
               strspn(line, "0123456789abcdef-") > 8) {
      size_t len = strcspn(line, "\n");
      if (len >= sizeof name) len = sizeof name - 1;
      memcpy(name, line, len);
      name[len] = '\0';
    }
  }
  fclose(f);
  for (int i = 0; i < n && top[i].kib; i++) fprintf(out, "  %8ld KiB  %s\n", top[i].kib, top[i].name);
}
