#include "store.h"

#include <cstdint>
#include <cstring>

#include "errors.h"

namespace plait_gloo {

// The wire form of the pairs one rank contributes to a round (today always
// one), explicit little-endian:
//   u32 count, then count times { u32 key_len, key, u64 value_len, value }.
static void put_u64(std::vector<char> &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) out.push_back((char)((v >> (8 * i)) & 0xff));
}

static std::vector<char> encode(
    const std::map<std::string, std::vector<char>> &pairs) {
  std::vector<char> out;
  put_u64(out, pairs.size(), 4);
  for (const auto &kv : pairs) {
    put_u64(out, kv.first.size(), 4);
    out.insert(out.end(), kv.first.begin(), kv.first.end());
    put_u64(out, kv.second.size(), 8);
    out.insert(out.end(), kv.second.begin(), kv.second.end());
  }
  return out;
}

namespace {
struct Reader {
  const unsigned char *p;
  size_t left;
  int from;

  uint64_t u(int bytes) {
    if (left < (size_t)bytes) truncated();
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    p += bytes;
    left -= (size_t)bytes;
    return v;
  }
  const char *take(uint64_t n) {
    if (left < n) truncated();
    const char *at = (const char *)p;
    p += n;
    left -= (size_t)n;
    return at;
  }
  [[noreturn]] void truncated() const {
    fail(PLAIT_ERR_PROTOCOL,
         "gloo store: the pairs received from rank %d are truncated", from);
  }
};
}  // namespace

static void decode(const unsigned char *data, size_t len, int from,
                   std::map<std::string, std::vector<char>> &into) {
  Reader r{data, len, from};
  uint64_t count = r.u(4);
  for (uint64_t i = 0; i < count; i++) {
    uint64_t klen = r.u(4);
    const char *k = r.take(klen);
    uint64_t vlen = r.u(8);
    const char *v = r.take(vlen);
    into[std::string(k, (size_t)klen)] = std::vector<char>(v, v + vlen);
  }
}

BootstrapStore::BootstrapStore(const plait_bootstrap_t *bootstrap)
    : bootstrap_(bootstrap) {}

void BootstrapStore::set(const std::string &key,
                         const std::vector<char> &data) {
  exchange(key, data);
}

// One round: allgather every rank's encoded length, then every rank's bytes
// padded to the longest.
void BootstrapStore::exchange(const std::string &key,
                              const std::vector<char> &data) {
  const int n = bootstrap_->nranks;
  std::map<std::string, std::vector<char>> own;
  own[key] = data;
  std::vector<char> mine = encode(own);
  uint64_t my_len = mine.size();
  std::vector<uint64_t> lens((size_t)n);
  plait_result_t rc = bootstrap_->allgather(bootstrap_->ctx, &my_len,
                                            sizeof my_len, lens.data());
  if (rc != PLAIT_SUCCESS)
    fail(rc, "gloo store: bootstrap allgather of lengths failed (%s)",
         plait_result_name_inline(rc));
  uint64_t longest = 0;
  for (uint64_t l : lens) longest = l > longest ? l : longest;
  mine.resize((size_t)longest);
  std::vector<unsigned char> all((size_t)(longest * (uint64_t)n));
  rc = bootstrap_->allgather(bootstrap_->ctx, mine.data(), (size_t)longest,
                             all.data());
  if (rc != PLAIT_SUCCESS)
    fail(rc, "gloo store: bootstrap allgather of %llu bytes failed (%s)",
         (unsigned long long)longest, plait_result_name_inline(rc));
  for (int r = 0; r < n; r++) {
    if (r == bootstrap_->rank) continue;
    decode(all.data() + (size_t)r * longest, (size_t)lens[(size_t)r], r,
           known_);
  }
  known_[key] = data;
  rounds_++;
}

void BootstrapStore::ensure(const std::vector<std::string> &keys,
                            const char *what) const {
  for (const auto &k : keys)
    if (known_.count(k) == 0)
      fail(PLAIT_ERR_INTERNAL,
           "gloo store: %s of key '%s', which no rank has set in the %d "
           "bootstrap round%s so far (this gloo version drives its Store in "
           "an order the plugin does not expect)",
           what, k.c_str(), rounds_, rounds_ == 1 ? "" : "s");
}

std::vector<char> BootstrapStore::get(const std::string &key) {
  ensure({key}, "get");
  return known_.at(key);
}

void BootstrapStore::wait(const std::vector<std::string> &keys) {
  ensure(keys, "wait");
}

void BootstrapStore::wait(const std::vector<std::string> &keys,
                          const std::chrono::milliseconds & /*timeout*/) {
  // The bootstrap has its own timeout (PLAIT_TIMEOUT_S) and never hangs.
  ensure(keys, "wait");
}

}  // namespace plait_gloo
