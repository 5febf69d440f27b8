// Open-addressing map from a 64-bit id to a small value, keys stored in the table (for the trace
// passes: next-use positions, stack distances). Linear probing, no erase; grows at 1/2 load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cache_sim/detail/hash.h"

namespace ip::cache::detail {

template <class V>
class FlatMap {
 public:
  explicit FlatMap(std::size_t expected = 16) {
    std::size_t size = 16;
    while (size < expected * 2) size *= 2;
    keys_.assign(size, kEmpty);
    vals_.resize(size);
  }

  // The value for `id`, inserting `init` when absent; `inserted` tells which.
  V& get(std::uint64_t id, const V& init, bool& inserted) {
    if (id == kEmpty) {
      inserted = !has_empty_key_;
      if (inserted) empty_key_val_ = init;
      has_empty_key_ = true;
      return empty_key_val_;
    }
    if ((count_ + 1) * 2 > keys_.size()) grow();
    std::size_t i = mix64(id) & (keys_.size() - 1);
    while (keys_[i] != kEmpty && keys_[i] != id) i = (i + 1) & (keys_.size() - 1);
    inserted = keys_[i] == kEmpty;
    if (inserted) {
      keys_[i] = id;
      vals_[i] = init;
      ++count_;
    }
    return vals_[i];
  }

  std::size_t size() const { return count_ + (has_empty_key_ ? 1 : 0); }

  // Calls f(value&) for every entry.
  template <class F>
  void for_each_value(F&& f) {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty) f(vals_[i]);
    if (has_empty_key_) f(empty_key_val_);
  }

 private:
  static constexpr std::uint64_t kEmpty = UINT64_MAX;

  void grow() {
    std::vector<std::uint64_t> keys(keys_.size() * 2, kEmpty);
    std::vector<V> vals(keys.size());
    const std::size_t mask = keys.size() - 1;
    for (std::size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == kEmpty) continue;
      std::size_t i = mix64(keys_[j]) & mask;
      while (keys[i] != kEmpty) i = (i + 1) & mask;
      keys[i] = keys_[j];
      vals[i] = std::move(vals_[j]);
    }
    keys_.swap(keys);
    vals_.swap(vals);
  }

  std::vector<std::uint64_t> keys_;
  std::vector<V> vals_;
  std::size_t count_ = 0;
  bool has_empty_key_ = false;
  V empty_key_val_{};
};

}  // namespace ip::cache::detail
