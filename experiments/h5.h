// A thin RAII wrapper over the HDF5 C API: files, groups, float/int datasets, scalar attributes.
// Every failure throws ip::Error naming the file and the object; HDF5's own error printing is off.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ip::h5 {

// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

 private:
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// A dataset's element class and shape, read without reading its data.
struct DatasetInfo {
  bool is_float = false;
  bool is_integer = false;
  std::size_t element_size = 0;
  std::vector<Index64> shape;
};

class File {
 public:
  // mode: "r" read-only, "w" create or truncate, "x" create, failing if the file exists.
  File(const std::string& path, const std::string& mode);
  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }

  bool exists(const std::string& name) const;  // dataset or group at this path
  DatasetInfo info(const std::string& name) const;

  void create_group(const std::string& name);
  void write(const std::string& name, const Tensor<float>& t);
  void write(const std::string& name, const std::vector<std::int32_t>& v, const std::vector<Index64>& shape);
  Tensor<float> read_float(const std::string& name) const;  // any float dataset of rank 1..3, as float32

  void set_attr(const std::string& object, const std::string& name, const std::string& value);
  void set_attr(const std::string& object, const std::string& name, std::int64_t value);
  std::string attr_string(const std::string& object, const std::string& name) const;
  std::int64_t attr_int(const std::string& object, const std::string& name) const;

 private:
  std::string where(const std::string& name) const { return path_ + ":" + name; }
  std::string path_;
  Handle file_;
};

}  // namespace ip::h5
