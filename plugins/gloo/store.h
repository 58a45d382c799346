// A gloo::rendezvous::Store on plait's bootstrap (allgather of bytes over the
// core's control plane): no files, no Redis, no server of its own.
//
// A bootstrap round is collective, so the store must make every rank run the
// same number of rounds. What is the same on every rank is the number of
// set() calls: connectFullMesh in gloo 0.5.0 (Debian's 20220518 snapshot)
// does, on rank r:
//   set("rank_<r>", hostname); get("rank_<i>") for i < r  (local ranks)
//   set("<r>", addresses of r's pairs); wait({"<i>"}), get("<i>") for i != r
// Rank 0 gets nothing in the first phase, so rounds run on a miss in
// get()/wait() would pair rank 0's second-phase round with the others'
// first-phase round, and fail. Instead each set() is one round: every rank
// allgathers the pair it sets, so after its k-th set() a rank holds every
// rank's k-th pair. get()/wait() then never communicate; a key that is still
// missing is an error that names it, never a hang.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "plait/transport.h"

namespace plait_gloo {

class BootstrapStore : public gloo::rendezvous::Store {
 public:
  explicit BootstrapStore(const plait_bootstrap_t *bootstrap);
  ~BootstrapStore() override = default;

  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

  // Every pair known here: set locally or received in a round.
  const std::map<std::string, std::vector<char>> &pairs() const {
    return known_;
  }
  int rounds() const { return rounds_; }

 private:
  void exchange(const std::string &key, const std::vector<char> &data);
  void ensure(const std::vector<std::string> &keys, const char *what) const;

  const plait_bootstrap_t *bootstrap_;
  std::map<std::string, std::vector<char>> known_;
  int rounds_ = 0;
};

}  // namespace plait_gloo
