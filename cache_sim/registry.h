// The policies, chosen by name from one explicit table (registry.cc).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cache_sim/level.h"
#include "cache_sim/policy.h"

namespace ip::cache {

struct PolicyInfo {
  const char* name;
  const char* summary;
  // A level of this policy: name (the full spec text), capacity, parameters, keep_touches.
  std::unique_ptr<Level> (*make)(std::string, const Capacity&, PolicyArgs&, bool);
};

// Every policy, in the order of the table.
std::span<const PolicyInfo> policy_table();

// Checks a policy spec: a name from the table, optionally with parameters in parentheses, e.g.
// "lru", "semantic(decay=0.95)". Unknown names or parameters, bad values: ip::Error naming them.
void check_policy(std::string_view spec);

// "lru, clock, ..." for messages and --help.
std::string policy_names();

}  // namespace ip::cache
