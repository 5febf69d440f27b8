// A thin RAII wrapper over the HDF5 C API: files, groups, float/int datasets, scalar attributes,
// tables (1-D compound datasets) and object/attribute copies between files.
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
  hid_t release() {  // gives up ownership without closing
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
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
  std::string type_name;  // "float32", "int64", "bytes[16]", "compound{a: int64, ...}", ...
};

// One column of a Table: fixed-length byte strings, int64 or float64; only the vector of its kind is used.
struct Column {
  enum class Kind { kString, kInt64, kFloat64 };
  std::string name;
  Kind kind = Kind::kFloat64;
  std::vector<std::string> strings;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::size_t size() const;
};

// Named columns of equal length, stored as a 1-D compound dataset (numpy reads it as a record array,
// pandas.DataFrame(f[name][:]) as a frame). A string column is stored with the width of the next power of
// two >= its longest value (at least 8 bytes), so that appended rows usually fit.
struct Table {
  std::vector<Column> columns;
  std::size_t rows() const { return columns.empty() ? 0 : columns.front().size(); }
  Column& add(const std::string& name, Column::Kind kind);  // valid until the next add
  const Column& column(const std::string& name) const;  // throws if absent
};

class File {
 public:
  // mode: "r" read-only, "a" read-write (must exist), "w" create or truncate, "x" create, failing if the
  // file exists.
  File(const std::string& path, const std::string& mode);
  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  void close();  // flushes and closes now, reporting failure (the destructor cannot)

  bool exists(const std::string& name) const;  // dataset or group at this path
  bool is_group(const std::string& name) const;
  std::vector<std::string> list(const std::string& group) const;  // member names, sorted
  DatasetInfo info(const std::string& name) const;
  void remove(const std::string& name);  // unlinks a dataset or group

  void create_group(const std::string& name);
  // Copies object `src_name` of `src` (a group with everything under it, or a dataset) to `dst_name` here.
  void copy_from(const File& src, const std::string& src_name, const std::string& dst_name);
  void write(const std::string& name, const Tensor<float>& t);
  void write(const std::string& name, const std::vector<std::int32_t>& v, const std::vector<Index64>& shape);
  Tensor<float> read_float(const std::string& name) const;  // any float dataset of rank 1..3, as float32
  std::vector<std::int32_t> read_int32(const std::string& name) const;  // any integer dataset, flattened

  // Tables: written with one H5Dwrite; chunk_rows > 0 makes the dataset extendible (see append_table).
  void write_table(const std::string& name, const Table& t, Index64 chunk_rows = 0);
  // Appends t's rows to an extendible table with the same columns in the same order, with one H5Dwrite.
  // Returns false, writing nothing, when the columns differ, a string is longer than its stored width or
  // the dataset is not extendible (the caller then rewrites the table).
  bool append_table(const std::string& name, const Table& t);
  Table read_table(const std::string& name) const;  // string, integer and float members

  void set_attr(const std::string& object, const std::string& name, const std::string& value);
  void set_attr(const std::string& object, const std::string& name, std::int64_t value);
  std::string attr_string(const std::string& object, const std::string& name) const;
  std::int64_t attr_int(const std::string& object, const std::string& name) const;
  bool has_attr(const std::string& object, const std::string& name) const;
  void remove_attr(const std::string& object, const std::string& name);  // nothing when absent
  std::vector<std::string> attr_names(const std::string& object) const;  // in creation order
  std::string attr_text(const std::string& object, const std::string& name) const;  // any scalar, as text
  // Copies every attribute of `src_object` in `src` onto `dst_object` here (fixed-size types only).
  void copy_attrs_from(const File& src, const std::string& src_object, const std::string& dst_object);

 private:
  std::string where(const std::string& name) const { return path_ + ":" + name; }
  std::string path_;
  Handle file_;
};

// What HDF5's error stack says about the call that just failed: the system's message when there is one
// ("No space left on device"), else the innermost description; "" when the stack is empty.
std::string hdf5_cause();
// ": " + hdf5_cause(), or "" (to append to an error message).
std::string cause_of_failure();

}  // namespace ip::h5
