// Workload import from HDF5 (DESIGN.md, "Workload import"): index_keys [T, D], index_queries [Q, H, D],
// head_weights [Q, H] (float32), optionally attn_keys [T, Da], attn_queries [Q, Ha, Da] (or [Q, Da]) and
// values [T, Dv]. The three attention arrays come together or not at all.
#pragma once

#include <string>

#include "core/workload.h"

namespace ip::exp {

// Reads and validates; throws ip::Error naming the file and the dataset on any problem.
Workload import_workload(const std::string& path);

}  // namespace ip::exp
