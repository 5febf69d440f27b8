// RAII owners of device memory, streams and events. Plain cudaMalloc (DESIGN: sized from an estimate
// made before a point runs); every call checked with IP_CUDA_CHECK.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda_check.h"

namespace ip::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }

  // Reallocates only when n elements do not fit; contents are not preserved.
  void resize(std::size_t n) {
    if (n <= capacity_ && ptr_) {
      size_ = n;
      return;
    }
    release();
    if (n) IP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
    size_ = capacity_ = n;
  }
  void release() noexcept {
    if (ptr_) IP_CUDA_CHECK_NOTHROW(cudaFree(ptr_));
    ptr_ = nullptr;
    size_ = capacity_ = 0;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  void upload(const T* host, std::size_t n, cudaStream_t s = nullptr) {
    resize(n);
    if (n) IP_CUDA_CHECK(cudaMemcpyAsync(ptr_, host, n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  void upload(const std::vector<T>& host, cudaStream_t s = nullptr) { upload(host.data(), host.size(), s); }
  // Copies n elements into [at, at + n) without resizing (the range must lie inside size()).
  void upload_at(std::size_t at, const T* host, std::size_t n, cudaStream_t s = nullptr) {
    IP_REQUIRE(at <= size_ && n <= size_ - at, "device buffer: upload of [{}, {}) outside its {} elements", at, at + n,
               size_);
    if (n) IP_CUDA_CHECK(cudaMemcpyAsync(ptr_ + at, host, n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  void download(T* host, std::size_t n, cudaStream_t s = nullptr) const {
    if (n) IP_CUDA_CHECK(cudaMemcpyAsync(host, ptr_, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  }
  std::vector<T> to_host(cudaStream_t s = nullptr) const {
    std::vector<T> h(size_);
    download(h.data(), size_, s);
    IP_CUDA_CHECK(cudaStreamSynchronize(s));
    return h;
  }
  // Fills every byte with `byte` (tests poison outputs with 0xFF: NaN for floats, -1 for ids).
  void fill_bytes(int byte, cudaStream_t s = nullptr) {
    if (size_) IP_CUDA_CHECK(cudaMemsetAsync(ptr_, byte, bytes(), s));
  }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

class Stream {
 public:
  Stream() { IP_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { IP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }
  void sync() const { IP_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { IP_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { IP_CUDA_CHECK_NOTHROW(cudaEventDestroy(e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s) { IP_CUDA_CHECK(cudaEventRecord(e_, s)); }
  void sync() const { IP_CUDA_CHECK(cudaEventSynchronize(e_)); }
  cudaEvent_t get() const { return e_; }
  // Milliseconds from `start` to this event (both recorded and complete).
  float ms_since(const Event& start) const {
    float ms = 0;
    IP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace ip::cuda
