/* plait-bench: tensor-size mixes (bench/mixes/README.md describes the files). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int add(bench_mix_t *mix, size_t *cap, uint64_t bytes) {
  if (mix->count == *cap) {
    size_t ncap = *cap ? *cap * 2 : 64;
    size_t *nb = realloc(mix->bytes, ncap * sizeof *nb);
    if (!nb) return -1;
    mix->bytes = nb;
    *cap = ncap;
  }
  mix->bytes[mix->count++] = (size_t)bytes;
  mix->total += bytes;
  return 0;
}

static const char *base_name(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  snprintf(out, cap, "%s", slash ? slash + 1 : path);
  char *dot = strrchr(out, '.');
  if (dot && dot != out) *dot = '\0';
  return out;
}

static int load_file(const char *path, bench_mix_t *mix, size_t *cap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "plait-bench: --mix %s: cannot open it: %s\n", path, strerror(errno));
    return -1;
  }
  char line[1024];
  int lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line + strspn(line, " \t");
    if (*p == '#' || *p == '\n' || *p == '\0') continue;
    /* <name> <dtype> <shape> <bytes>: the last field is what matters here. */
    char name[512], dtype[32], shape[256];
    unsigned long long bytes;
    if (sscanf(p, "%511s %31s %255s %llu", name, dtype, shape, &bytes) != 4 || bytes == 0) {
      fprintf(stderr, "plait-bench: --mix %s line %d: expected '<name> <dtype> <shape> <bytes>' "
              "with bytes > 0\n", path, lineno);
      fclose(f);
      return -1;
    }
    if (add(mix, cap, bytes)) {
      fclose(f);
      fprintf(stderr, "plait-bench: out of memory reading %s\n", path);
      return -1;
    }
  }
  fclose(f);
  if (mix->count == 0) {
    fprintf(stderr, "plait-bench: --mix %s lists no tensors\n", path);
    return -1;
  }
  base_name(path, mix->name, sizeof mix->name);
  return 0;
}

int bench_load_mix(const char *spec, bench_mix_t *mix) {
  memset(mix, 0, sizeof *mix);
  size_t cap = 0;
  if (!strncmp(spec, "uniform:", 8)) {
    const char *x = strchr(spec + 8, 'x');
    char count_text[32];
    uint64_t count = 0, size = 0;
    if (x && (size_t)(x - (spec + 8)) < sizeof count_text) {
      snprintf(count_text, sizeof count_text, "%.*s", (int)(x - (spec + 8)), spec + 8);
      if (plait_parse_size(count_text, &count) || plait_parse_size(x + 1, &size)) count = 0;
    }
    if (count == 0 || count > 100000 || size == 0) {
      fprintf(stderr, "plait-bench: --mix '%s': expected uniform:COUNTxSIZE, e.g. uniform:200x64K\n",
              spec);
      return -1;
    }
    for (uint64_t i = 0; i < count; i++)
      if (add(mix, &cap, size)) return -1;
    snprintf(mix->name, sizeof mix->name, "uniform-%sx%s", count_text, x + 1);
    return 0;
  }
  if (!strncmp(spec, "sizes:", 6)) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec + 6);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      uint64_t size;
      if (plait_parse_size(tok, &size) || size == 0) {
        fprintf(stderr, "plait-bench: --mix '%s': '%s' is not a size > 0\n", spec, tok);
        bench_free_mix(mix);
        return -1;
      }
      if (add(mix, &cap, size)) return -1;
    }
    if (mix->count == 0) {
      fprintf(stderr, "plait-bench: --mix '%s' lists no sizes\n", spec);
      return -1;
    }
    snprintf(mix->name, sizeof mix->name, "sizes-%zu", mix->count);
    return 0;
  }
  return load_file(spec, mix, &cap);
}

void bench_free_mix(bench_mix_t *mix) {
  free(mix->bytes);
  mix->bytes = NULL;
  mix->count = 0;
}
