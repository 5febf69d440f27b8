// Row-major typed tensors (owning) and matrix views (non-owning, with a row stride).
// Arithmetic goes through Eigen maps of these views (see eigen()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "core/error.h"

namespace ip {

using Index64 = std::int64_t;

// A 2-D row-major view: rows x cols elements, row r starting at data + r * ld.
template <class T>
struct MatrixView {
  T* data = nullptr;
  Index64 rows = 0;
  Index64 cols = 0;
  Index64 ld = 0;  // elements between consecutive rows (>= cols)

  MatrixView() = default;
  MatrixView(T* d, Index64 r, Index64 c) : MatrixView(d, r, c, c) {}
  MatrixView(T* d, Index64 r, Index64 c, Index64 stride) : data(d), rows(r), cols(c), ld(stride) {
    IP_REQUIRE(r >= 0 && c >= 0, "matrix view: negative shape [{}, {}]", r, c);
    IP_REQUIRE(stride >= c, "matrix view: row stride {} is smaller than the row length {}", stride, c);
    IP_REQUIRE(d != nullptr || r * c == 0, "matrix view: null data for shape [{}, {}]", r, c);
  }
  // Allow MatrixView<T> -> MatrixView<const T>.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  MatrixView(const MatrixView<U>& o) : data(o.data), rows(o.rows), cols(o.cols), ld(o.ld) {}

  T* row(Index64 r) const { return data + r * ld; }
  T& operator()(Index64 r, Index64 c) const { return data[r * ld + c]; }
  bool contiguous() const { return ld == cols; }
  // Rows [begin, end) as a view.
  MatrixView rows_range(Index64 begin, Index64 end) const {
    IP_REQUIRE(0 <= begin && begin <= end && end <= rows, "matrix view: row range [{}, {}) outside [0, {})",
               begin, end, rows);
    return MatrixView(data + begin * ld, end - begin, cols, ld);
  }

  using EigenMat = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using EigenMap = Eigen::Map<std::conditional_t<std::is_const_v<T>, const EigenMat, EigenMat>, Eigen::Unaligned,
                              Eigen::OuterStride<>>;
  EigenMap eigen() const { return EigenMap(data, rows, cols, Eigen::OuterStride<>(ld)); }
};

// Owning, contiguous, row-major tensor of rank 1..3 with 64-byte aligned storage.
template <class T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<Index64> shape) { reshape(std::move(shape)); }
  Tensor(std::initializer_list<Index64> shape) { reshape(std::vector<Index64>(shape)); }

  void reshape(std::vector<Index64> shape) {
    IP_REQUIRE(!shape.empty() && shape.size() <= 3, "tensor: rank {} not supported (1..3)", shape.size());
    for (auto s : shape) IP_REQUIRE(s >= 0, "tensor: negative dimension {}", s);
    shape_ = std::move(shape);
    const Index64 n = std::accumulate(shape_.begin(), shape_.end(), Index64{1}, std::multiplies<>());
    if (n != size_) {
      data_.reset(n > 0 ? static_cast<T*>(std::aligned_alloc(64, round_up(n * sizeof(T)))) : nullptr);
      IP_REQUIRE(n == 0 || data_ != nullptr, "tensor: out of memory allocating {} bytes", n * sizeof(T));
      size_ = n;
    }
  }
  Tensor(const Tensor& o) : Tensor(o.shape_.empty() ? std::vector<Index64>{0} : o.shape_) {
    std::copy(o.data(), o.data() + size_, data());
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      reshape(o.shape_.empty() ? std::vector<Index64>{0} : o.shape_);
      std::copy(o.data(), o.data() + size_, data());
    }
    return *this;
  }
  Tensor(Tensor&& o) noexcept : shape_(std::move(o.shape_)), data_(std::move(o.data_)), size_(o.size_) {
    o.shape_.clear();
    o.size_ = 0;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    shape_ = std::move(o.shape_);
    data_ = std::move(o.data_);
    size_ = o.size_;
    o.shape_.clear();
    o.size_ = 0;
    return *this;
  }

  int rank() const { return static_cast<int>(shape_.size()); }
  Index64 dim(int i) const {
    IP_REQUIRE(i >= 0 && i < rank(), "tensor: dimension {} of a rank-{} tensor", i, rank());
    return shape_[i];
  }
  const std::vector<Index64>& shape() const { return shape_; }
  Index64 size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t bytes() const { return static_cast<std::size_t>(size_) * sizeof(T); }
  void fill(T v) { std::fill(data(), data() + size_, v); }

  // Rank 2: the whole tensor. Rank 3: slice i of the first axis.
  MatrixView<T> mat() { return MatrixView<T>(data(), rows2(), cols2()); }
  MatrixView<const T> mat() const { return MatrixView<const T>(data(), rows2(), cols2()); }
  MatrixView<T> slice(Index64 i) { return slice_impl<T>(data(), i); }
  MatrixView<const T> slice(Index64 i) const { return slice_impl<const T>(data(), i); }

 private:
  static std::size_t round_up(std::size_t b) { return (b + 63) / 64 * 64; }
  Index64 rows2() const {
    IP_REQUIRE(rank() == 2, "tensor: a matrix view needs rank 2, this tensor has rank {}", rank());
    return shape_[0];
  }
  Index64 cols2() const { return shape_[1]; }
  template <class U>
  MatrixView<U> slice_impl(U* base, Index64 i) const {
    IP_REQUIRE(rank() == 3, "tensor: slice needs rank 3, this tensor has rank {}", rank());
    IP_REQUIRE(i >= 0 && i < shape_[0], "tensor: slice {} outside [0, {})", i, shape_[0]);
    return MatrixView<U>(base + i * shape_[1] * shape_[2], shape_[1], shape_[2]);
  }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::vector<Index64> shape_;
  std::unique_ptr<T, Free> data_;
  Index64 size_ = 0;
};

}  // namespace ip
