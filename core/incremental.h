// Incremental index updates (issue 7): after the access statistics move, re-pool only the groups whose
// weights moved; after the context grows, pool the new tokens into the last group and new groups.
//
// A group's movement is the relative L1 change of its weight vector since the weights its composite
// was last pooled with: m_g = sum_{i in g} |w_i - w'_i| / sum_{i in g} |w'_i|. A group is re-pooled when
// m_g > tau (strictly), when it holds tokens the index did not cover yet (a grown context), or when the
// index is empty or its scheme, group size, precision or dimension changed. tau < 0 re-pools every
// group. tau = 0 re-pools exactly the groups whose weights changed at all; the others would be pooled
// from the same keys and weights into the same bits, so tau = 0 gives the index a full rebuild gives,
// bit for bit (tests/core/incremental_test.cc).
#pragma once

#include <vector>

#include "core/incremental_math.h"
#include "core/pool.h"

namespace ip {

struct IndexState {
  PooledIndex index;
  std::vector<float> weights;  // per covered token: the weight its group's composite was pooled with
};

struct RepoolCount {
  Index64 repooled = 0;  // groups pooled by this update
  Index64 groups = 0;    // groups of the index after it
  double fraction() const { return groups ? static_cast<double>(repooled) / static_cast<double>(groups) : 0.0; }
};

// weight_movement and repool_group (the per-group decision): core/incremental_math.h.

// Brings `st` up to `keys` (keys.rows >= the tokens st covers; its first rows are the same keys).
RepoolCount update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                         const float* query_ref, float tau, IndexState& st);

}  // namespace ip
