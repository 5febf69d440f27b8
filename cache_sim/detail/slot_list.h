// Intrusive doubly linked list over slots: two u32 links per slot, no allocation per entry.
// Front = most recently inserted (or moved), back = oldest. Node 0 is the sentinel; slot s is node s + 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ip::cache::detail {

class SlotList {
 public:
  using Slot = std::uint32_t;
  static constexpr Slot kNone = UINT32_MAX;

  SlotList() { nodes_.assign(1, Node{0, 0}); }

  void resize(Slot slots) {
    nodes_.reserve(std::size_t{slots} + 1);
    nodes_.resize(std::size_t{slots} + 1, Node{0, 0});
  }

  Slot slots() const { return static_cast<Slot>(nodes_.size() - 1); }
  bool empty() const { return nodes_[0].next == 0; }
  Slot front() const { return nodes_[0].next - 1; }  // kNone when empty
  Slot back() const { return nodes_[0].prev - 1; }   // kNone when empty

  // The neighbour toward the front (newer) / the back (older); kNone past the ends.
  Slot newer(Slot s) const { return nodes_[s + 1].prev - 1; }
  Slot older(Slot s) const { return nodes_[s + 1].next - 1; }

  void push_front(Slot s) {
    const std::uint32_t n = s + 1, first = nodes_[0].next;
    nodes_[n] = Node{0, first};
    nodes_[first].prev = n;
    nodes_[0].next = n;
  }

  void remove(Slot s) {
    const Node node = nodes_[s + 1];
    nodes_[node.prev].next = node.next;
    nodes_[node.next].prev = node.prev;
  }

  void move_to_front(Slot s) {
    if (nodes_[0].next == s + 1) return;
    remove(s);
    push_front(s);
  }

  void prefetch(Slot s) const { __builtin_prefetch(nodes_.data() + s + 1); }

  std::size_t bytes() const { return nodes_.capacity() * sizeof(Node); }

 private:
  struct Node {
    std::uint32_t prev;  // toward the front
    std::uint32_t next;  // toward the back
  };
  std::vector<Node> nodes_;
};

}  // namespace ip::cache::detail
