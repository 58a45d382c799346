// subset(): a gloo context over some of the ranks, connected through the
// parent's own collectives (never the bootstrap, which after init belongs to
// the core's control plane).
//
// The members make plait's authenticated links among themselves (links.h,
// the same as at init, so no stranger's connection ever reaches a gloo pair)
// and connect a LinkedContext on them (handover.h). The links' exchanges run
// as rounds over the parent: an allgather of every parent rank's payload,
// members' and non-members' alike. Non-members take part in the same rounds
// with nothing to say; once connected, each member runs one more round with
// nothing to say, and a round in which no member says anything ends the
// exchange on every rank.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "handover.h"
#include "links.h"
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

// The links' allgathers among the members, as rounds over the parent: recv
// gets each member's payload in the members' order.
Allgather members_allgather(State &parent, const std::vector<int> &members) {
  return [&parent, members](const void *send, size_t bytes, void *recv) {
    const char *p = static_cast<const char *>(send);
    auto got = round_over(parent, std::vector<char>(p, p + bytes));
    for (size_t i = 0; i < members.size(); i++) {
      const auto &g = got[(size_t)members[i]];
      if (g.size() != bytes)
        fail(PLAIT_ERR_PROTOCOL, "subset: rank %d sent %zu bytes for its links, not %zu",
             members[i], g.size(), bytes);
      std::memcpy(static_cast<char *>(recv) + i * bytes, g.data(), bytes);
    }
  };
}

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
  s->host_address = parent.host_address;
  if (n > 1) {
    s->device = parent.device;  // one device, many contexts
    Links links;
    open_links(members_allgather(parent, members), s->rank, n, s->host_address.c_str(),
               s->timeout_s, LinkLog{s->log, s->log_level}, links);
    auto context = std::make_shared<LinkedContext>(s->rank, n);
    context->setTimeout(parent.context->getTimeout());
    PeerAddresses by_member((size_t)n);
    context->connect(s->device, links, by_member,
                     HandoverOptions{LinkLog{s->log, s->log_level}, nullptr, nullptr});
    s->context = context;
    // Indexed by the parent's ranks: a failure's message names the rank of the job.
    s->peer_addresses.assign((size_t)parent.nranks, Peer{});
    for (size_t i = 0; i < members.size() && i < by_member.size(); i++)
      s->peer_addresses[(size_t)members[i]] = by_member[i];
    round_over(parent, {});  // the members' last round: nothing more to say
  }
  PLAIT_GLOO_DEBUG(*s, "subset of %d ranks made: this is rank %d there (rank %d of the parent)",
                   n, s->rank, parent.rank);
  return s.release();
}

}  // namespace plait_gloo
