// Workload import from HDF5 (DESIGN.md, "Workload import"): index_keys [T, D], index_queries [Q, H, D],
// head_weights [Q, H] (float32), optionally attn_keys [T, Da], attn_queries [Q, Ha, Da] (or [Q, Da]) and
// values [T, Dv]. The three attention arrays come together or not at all.
#pragma once

#include <cstdint>
#include <string>

#include "core/workload.h"

namespace ip::exp {

// Reads and validates; throws ip::Error naming the file and the dataset on any problem.
Workload import_workload(const std::string& path);

// The identity of a file's bytes: its size and a 64-bit hash of them (not cryptographic; the same on every
// machine). An imported workload's sweep id includes it, so --resume and merge refuse to mix points of two
// different files given under one path. Throws ip::Error naming the file when it cannot be read.
struct FileDigest {
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};
FileDigest file_digest(const std::string& path);

}  // namespace ip::exp
