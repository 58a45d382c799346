// subset(): a State over some ranks of a parent State (transport.h, subset).
#pragma once

#include "state.h"

namespace plait_gloo {

// Collective over parent; the new State on a member, nullptr elsewhere.
// Throws like every operation.
State *subset(State &parent, const int *ranks, int n);

}  // namespace plait_gloo
