// Open-addressing map from a 64-bit id to a small value, key and value side by side in one bucket
// (for the trace passes: next-use positions, stack distances). Linear probing, no erase; grows at
// 1/2 load.
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
    buckets_.assign(size, Bucket{kEmpty, V{}});
  }

  // The value for `id`, inserting `init` when absent; `inserted` tells which.
  V& get(std::uint64_t id, const V& init, bool& inserted) {
    if (id == kEmpty) {
      inserted = !has_empty_key_;
      if (inserted) empty_key_val_ = init;
      has_empty_key_ = true;
      return empty_key_val_;
    }
    if ((count_ + 1) * 2 > buckets_.size()) grow();
    const std::size_t mask = buckets_.size() - 1;
    std::size_t i = mix64(id) & mask;
    while (buckets_[i].key != kEmpty && buckets_[i].key != id) i = (i + 1) & mask;
    inserted = buckets_[i].key == kEmpty;
    if (inserted) {
      buckets_[i] = Bucket{id, init};
      ++count_;
    }
    return buckets_[i].val;
  }

  // The value for `id`, or null.
  const V* find(std::uint64_t id) const {
    if (id == kEmpty) return has_empty_key_ ? &empty_key_val_ : nullptr;
    const std::size_t mask = buckets_.size() - 1;
    for (std::size_t i = mix64(id) & mask;; i = (i + 1) & mask) {
      if (buckets_[i].key == id) return &buckets_[i].val;
      if (buckets_[i].key == kEmpty) return nullptr;
    }
  }

  void prefetch(std::uint64_t id) const { __builtin_prefetch(&buckets_[mix64(id) & (buckets_.size() - 1)]); }

  std::size_t size() const { return count_ + (has_empty_key_ ? 1 : 0); }

  // Calls f(value&) for every entry.
  template <class F>
  void for_each_value(F&& f) {
    for (auto& b : buckets_)
      if (b.key != kEmpty) f(b.val);
    if (has_empty_key_) f(empty_key_val_);
  }

 private:
  static constexpr std::uint64_t kEmpty = UINT64_MAX;
  struct Bucket {
    std::uint64_t key;
    V val;
  };

  void grow() {
    std::vector<Bucket> old(buckets_.size() * 2, Bucket{kEmpty, V{}});
    old.swap(buckets_);
    const std::size_t mask = buckets_.size() - 1;
    for (auto& b : old) {
      if (b.key == kEmpty) continue;
      std::size_t i = mix64(b.key) & mask;
      while (buckets_[i].key != kEmpty) i = (i + 1) & mask;
      buckets_[i] = std::move(b);
    }
  }

  std::vector<Bucket> buckets_;
  std::size_t count_ = 0;
  bool has_empty_key_ = false;
  V empty_key_val_{};
};

}  // namespace ip::cache::detail
