// subset(): a gloo context over some of the ranks, connected through the
// parent's own collectives (never the bootstrap, which after init belongs to
// the core's control plane).
//
// The members run gloo's connectFullMesh on a new context with a store whose
// every set() is one round over the parent: an allgather of (key, value)
// from every rank of the parent. Non-members take part in the same rounds
// with nothing to say. gloo makes every member call set() the same number of
// times (see store.h), so the members' rounds line up; once connected, each
// member runs one more round with nothing to say, and a round in which no
// member says anything ends the exchange on every rank.
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "log.h"
#include "ops.h"
#include "subset.h"

namespace plait_gloo {

namespace {

// One round over the parent: every rank's payload (empty: nothing to say).
std::vector<std::vector<char>> round_over(State &parent,
                                          const std::vector<char> &mine) {
  const size_t n = (size_t)parent.nranks;
  std::vector<uint64_t> lens(n, 0);
  lens[(size_t)parent.rank] = mine.size();
  std::vector<size_t> eight(n, sizeof(uint64_t));
  allgatherv(parent, lens.data(), eight.data());
  std::vector<size_t> bytes(n);
  size_t total = 0, before = 0;
  for (size_t r = 0; r < n; r++) {
    bytes[r] = (size_t)lens[r];
    if (r < (size_t)parent.rank) before += bytes[r];
    total += bytes[r];
  }
  std::vector<char> all(total ? total : 1);
  if (!mine.empty()) std::memcpy(all.data() + before, mine.data(), mine.size());
  allgatherv(parent, all.data(), bytes.data());
  std::vector<std::vector<char>> out(n);
  size_t off = 0;
  for (size_t r = 0; r < n; r++) {
    out[r].assign(all.begin() + (long)off, all.begin() + (long)(off + bytes[r]));
    off += bytes[r];
  }
  return out;
}

// A store on rounds over the parent (see the top of the file).
class ParentStore : public gloo::rendezvous::Store {
 public:
  explicit ParentStore(State &parent) : parent_(parent) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    std::vector<char> mine(key.begin(), key.end());
    mine.push_back('\0');
    mine.insert(mine.end(), data.begin(), data.end());
    for (const auto &p : round_over(parent_, mine)) {
      if (p.empty()) continue;
      auto nul = std::find(p.begin(), p.end(), '\0');
      if (nul == p.end()) fail(PLAIT_ERR_PROTOCOL, "subset: a malformed store round");
      known_[std::string(p.begin(), nul)] = std::vector<char>(nul + 1, p.end());
    }
  }
  std::vector<char> get(const std::string &key) override {
    ensure({key});
    return known_[key];
  }
  void wait(const std::vector<std::string> &keys) override { ensure(keys); }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    ensure(keys);
  }

 private:
  void ensure(const std::vector<std::string> &keys) const {
    for (const auto &k : keys)
      if (known_.find(k) == known_.end())
        fail(PLAIT_ERR_PROTOCOL,
             "subset: key '%s' was never published by the other members",
             k.c_str());
  }
  State &parent_;
  std::map<std::string, std::vector<char>> known_;
};

// Rounds with nothing to say until a round in which no member says anything.
void listen_until_quiet(State &parent, const std::vector<int> &members) {
  for (;;) {
    auto got = round_over(parent, {});
    bool any = false;
    for (int m : members) any |= !got[(size_t)m].empty();
    if (!any) return;
  }
}

void check_ranks(const State &parent, const int *ranks, int n) {
  PLAIT_GLOO_REQUIRE(ranks != nullptr, "subset: ranks is NULL");
  PLAIT_GLOO_REQUIRE(n >= 1 && n <= parent.nranks,
                     "subset: n is %d, not in [1, %d]", n, parent.nranks);
  for (int i = 0; i < n; i++) {
    PLAIT_GLOO_REQUIRE(ranks[i] >= 0 && ranks[i] < parent.nranks,
                       "subset: ranks[%d] is %d, not a rank of [0, %d)", i,
                       ranks[i], parent.nranks);
    PLAIT_GLOO_REQUIRE(i == 0 || ranks[i] > ranks[i - 1],
                       "subset: ranks[] is not increasing at index %d (%d after %d)",
                       i, ranks[i], ranks[i - 1]);
  }
}

}  // namespace

State *subset(State &parent, const int *ranks, int n) {
  check_ranks(parent, ranks, n);
  std::vector<int> members(ranks, ranks + n);
  auto it = std::find(members.begin(), members.end(), parent.rank);
  if (it == members.end()) {
    if (n > 1) listen_until_quiet(parent, members);
    return nullptr;
  }
  auto s = std::make_unique<State>();
  s->rank = (int)(it - members.begin());
  s->nranks = n;
  s->timeout_s = parent.timeout_s;
  s->log = parent.log;
  s->log_level = parent.log_level;
  s->reduce = parent.reduce;
  s->divide = parent.divide;
  // Indexed by the parent's ranks (the same listening socket serves every
  // context): a failure's message names the rank of the job.
  s->peer_addresses = parent.peer_addresses;
  if (n > 1) {
    s->device = parent.device;  // one device, one listening socket, many contexts
    s->context = std::make_shared<gloo::rendezvous::Context>(s->rank, n);
    s->context->setTimeout(parent.context->getTimeout());
    ParentStore store(parent);
    s->context->connectFullMesh(store, s->device);
    round_over(parent, {});  // the members' last round: nothing more to say
  }
  PLAIT_GLOO_DEBUG(*s, "subset of %d ranks made: this is rank %d there (rank %d of the parent)",
                   n, s->rank, parent.rank);
  return s.release();
}

}  // namespace plait_gloo
