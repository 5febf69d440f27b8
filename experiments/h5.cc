#include "experiments/h5.h"

#include <filesystem>

#include "core/error.h"

namespace ip::h5 {
namespace {

struct SilenceErrors {
  SilenceErrors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
const SilenceErrors silence_errors;

Handle dataspace(const std::vector<Index64>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
}

}  // namespace

File::File(const std::string& path, const std::string& mode) : path_(path) {
  hid_t id = H5I_INVALID_HID;
  if (mode == "r") {
    IP_REQUIRE(std::filesystem::exists(path), "HDF5 file '{}' does not exist", path);
    IP_REQUIRE(H5Fis_hdf5(path.c_str()) > 0, "'{}' is not a readable HDF5 file", path);
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  } else if (mode == "w") {
    id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  } else if (mode == "x") {
    id = H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  } else {
    throw Error(fmt::format("HDF5 file '{}': unknown open mode '{}'", path, mode));
  }
  IP_REQUIRE(id >= 0, "cannot open HDF5 file '{}' (mode '{}')", path, mode);
  file_ = Handle(id, H5Fclose);
}

bool File::exists(const std::string& name) const {
  // Check every prefix, as H5Lexists requires the intermediate groups to exist.
  std::size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

DatasetInfo File::info(const std::string& name) const {
  IP_REQUIRE(exists(name), "{}: no dataset '{}'", path_, name);
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  IP_REQUIRE(ds, "{}: '{}' is not a dataset", path_, name);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  DatasetInfo di;
  const H5T_class_t cls = H5Tget_class(type.get());
  di.is_float = cls == H5T_FLOAT;
  di.is_integer = cls == H5T_INTEGER;
  di.element_size = H5Tget_size(type.get());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  IP_REQUIRE(rank >= 0, "{}: cannot read the shape", where(name));
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  di.shape.assign(dims.begin(), dims.end());
  return di;
}

void File::create_group(const std::string& name) {
  Handle g(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  IP_REQUIRE(g, "{}: cannot create group", where(name));
}

void File::write(const std::string& name, const Tensor<float>& t) {
  Handle space = dataspace(t.shape());
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  IP_REQUIRE(ds, "{}: cannot create dataset", where(name));
  IP_REQUIRE(t.empty() || H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) >= 0,
             "{}: write failed", where(name));
}

void File::write(const std::string& name, const std::vector<std::int32_t>& v, const std::vector<Index64>& shape) {
  Index64 n = 1;
  for (auto s : shape) n *= s;
  IP_REQUIRE(n == static_cast<Index64>(v.size()), "{}: {} values for a shape of {} elements", where(name), v.size(), n);
  Handle space = dataspace(shape);
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  IP_REQUIRE(ds, "{}: cannot create dataset", where(name));
  IP_REQUIRE(v.empty() || H5Dwrite(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
             "{}: write failed", where(name));
}

Tensor<float> File::read_float(const std::string& name) const {
  const DatasetInfo di = info(name);
  IP_REQUIRE(di.is_float, "{}: expected a floating-point dataset", where(name));
  IP_REQUIRE(!di.shape.empty() && di.shape.size() <= 3, "{}: rank {} (expected 1 to 3)", where(name), di.shape.size());
  Tensor<float> t(di.shape);
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  IP_REQUIRE(t.empty() || H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) >= 0,
             "{}: read failed", where(name));
  return t;
}

void File::set_attr(const std::string& object, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT);
  Handle a(H5Acreate_by_name(id(), object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT),
           H5Aclose);
  IP_REQUIRE(a, "{}: cannot create attribute '{}'", where(object), name);
  const std::string v = value.empty() ? std::string(1, '\0') : value;
  IP_REQUIRE(H5Awrite(a.get(), type.get(), v.data()) >= 0, "{}: cannot write attribute '{}'", where(object), name);
}

void File::set_attr(const std::string& object, const std::string& name, std::int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT);
  Handle a(H5Acreate_by_name(id(), object.c_str(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose);
  IP_REQUIRE(a, "{}: cannot create attribute '{}'", where(object), name);
  IP_REQUIRE(H5Awrite(a.get(), H5T_NATIVE_INT64, &value) >= 0, "{}: cannot write attribute '{}'", where(object), name);
}

std::string File::attr_string(const std::string& object, const std::string& name) const {
  Handle a(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  IP_REQUIRE(a, "{}: no attribute '{}'", where(object), name);
  Handle type(H5Aget_type(a.get()), H5Tclose);
  IP_REQUIRE(H5Tget_class(type.get()) == H5T_STRING, "{}: attribute '{}' is not a string", where(object), name);
  IP_REQUIRE(H5Tis_variable_str(type.get()) <= 0, "{}: attribute '{}' is a variable-length string (not supported)",
             where(object), name);
  std::string s(H5Tget_size(type.get()), '\0');
  IP_REQUIRE(H5Aread(a.get(), type.get(), s.data()) >= 0, "{}: cannot read attribute '{}'", where(object), name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::int64_t File::attr_int(const std::string& object, const std::string& name) const {
  Handle a(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  IP_REQUIRE(a, "{}: no attribute '{}'", where(object), name);
  std::int64_t v = 0;
  IP_REQUIRE(H5Aread(a.get(), H5T_NATIVE_INT64, &v) >= 0, "{}: cannot read attribute '{}' as an integer",
             where(object), name);
  return v;
}

}  // namespace ip::h5
