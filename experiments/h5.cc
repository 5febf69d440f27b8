#include "experiments/h5.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/error.h"

namespace ip::h5 {
namespace {

// Before any other HDF5 call: no automatic printing of HDF5's error stack (errors become ip::Error, with
// the cause from the stack: hdf5_cause), and no cleanup at exit. Every file is closed explicitly; one whose
// close failed (a full disk) stays half-closed inside the library, and HDF5's atexit cleanup of it crashed
// (SIGSEGV in H5F__close_cb after the error message, exit status 139 instead of 1).
struct SilenceErrors {
  SilenceErrors() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
const SilenceErrors silence_errors;

}  // namespace

// HDF5's automatic printing is a setting of each thread's error stack in a thread-safe build (Debian's is):
// the setting above covers the thread that loaded the program only, and a failure in another thread (the stop
// deadline's flush) printed HDF5's whole error stack on stderr beside our message. Every File call makes
// sure of it for the thread it runs in. The stack is also emptied when the thread ends: HDF5 1.10 frees an
// ended thread's stack but not the descriptions of the entries a failure left on it (LeakSanitizer found
// them, make test-sanitize, H5Test.NoHdf5PrintingWhenAnotherThreadOpens).
namespace {
struct ThreadErrorStack {
  ThreadErrorStack() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
  ~ThreadErrorStack() { H5Eclear2(H5E_DEFAULT); }
};
}  // namespace

void quiet_this_thread() { thread_local const ThreadErrorStack stack; }

namespace {

herr_t deepest_error(unsigned, const H5E_error2_t* e, void* out) {
  auto* cause = static_cast<std::string*>(out);
  if (cause->empty() && e->desc && *e->desc) *cause = e->desc;  // walked from the innermost entry
  return 0;
}

Handle dataspace(const std::vector<Index64>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
}

std::string type_name(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return fmt::format("float{}", 8 * size);
    case H5T_INTEGER: return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * size);
    case H5T_STRING: return H5Tis_variable_str(type) > 0 ? "string" : fmt::format("bytes[{}]", size);
    case H5T_COMPOUND: {
      std::string s = "compound{";
      for (int m = 0; m < H5Tget_nmembers(type); ++m) {
        char* name = H5Tget_member_name(type, m);
        Handle mt(H5Tget_member_type(type, m), H5Tclose);
        s += fmt::format("{}{}: {}", m ? ", " : "", name, type_name(mt.get()));
        H5free_memory(name);
      }
      return s + "}";
    }
    default: return "other";
  }
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

}  // namespace

// What HDF5's error stack says went wrong, innermost first: the system's message when there is one
// ("No space left on device"), else the innermost description; "" when the stack is empty.
std::string hdf5_cause() {
  std::string desc;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, deepest_error, &desc);
  const std::string tag = "error message = '";
  if (const auto at = desc.find(tag); at != std::string::npos) {
    const auto end = desc.find('\'', at + tag.size());
    return desc.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
  }
  return desc;
}

std::string cause_of_failure() {
  const std::string cause = hdf5_cause();
  return cause.empty() ? std::string() : ": " + cause;
}

File::File(const std::string& path, const std::string& mode) : path_(path) {
  quiet_this_thread();
  hid_t id = H5I_INVALID_HID;
  // An existing file to read or append to must be a regular file: HDF5 would block for ever on a FIFO
  // (H5Fis_hdf5 opens it and waits for a writer) and fail obscurely on a directory or a device.
  auto require_regular = [&] {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    IP_REQUIRE(std::filesystem::exists(st), "HDF5 file '{}' does not exist", path);
    IP_REQUIRE(!std::filesystem::is_directory(st), "'{}' is a directory, not an HDF5 file", path);
    IP_REQUIRE(std::filesystem::is_regular_file(st), "'{}' is not a regular file (a FIFO, socket or device), not an "
               "HDF5 file", path);
  };
  // An existing file must be HDF5: opened read-write, a zero-byte file was silently made a new, empty one.
  auto require_hdf5 = [&] {
    require_regular();
    errno = 0;
    const htri_t is = H5Fis_hdf5(path.c_str());
    const int is_err = errno;  // a negative answer: it could not be opened (EMFILE: too many open files)
    IP_REQUIRE(is >= 0, "cannot open HDF5 file '{}' (mode '{}'){}", path, mode,
               is_err != 0 ? fmt::format(" (last system error: {})", std::strerror(is_err)) : std::string());
    IP_REQUIRE(is > 0, "'{}' is not a readable HDF5 file", path);
  };
  if (mode == "r") {
    require_hdf5();
    errno = 0;
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  } else if (mode == "a") {
    require_hdf5();
    errno = 0;
    id = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  } else if (mode == "w" || mode == "x") {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);  // root attributes listed in creation order
    H5Pset_attr_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    errno = 0;
    id = H5Fcreate(path.c_str(), mode == "w" ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT);
  } else {
    throw Error(fmt::format("HDF5 file '{}': unknown open mode '{}'", path, mode));
  }
  const int err = errno;  // what the failed open or create said (a full disk, a read-only file system)
  IP_REQUIRE(id >= 0, "cannot open HDF5 file '{}' (mode '{}'){}", path, mode,
             err != 0 ? fmt::format(" (last system error: {})", std::strerror(err)) : cause_of_failure());
  file_ = Handle(id, H5Fclose);
}

void File::close() {
  quiet_this_thread();
  if (!file_) return;
  if (H5Fclose(file_.release()) < 0) {
    const std::string cause = hdf5_cause();
    throw Error(fmt::format("cannot close HDF5 file '{}'{}{}", path_, cause.empty() ? "" : ": ", cause));
  }
}

bool File::exists(const std::string& name) const {
  quiet_this_thread();
  if (name.empty()) return false;  // no object has an empty name ("/" is the root group)
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
  quiet_this_thread();
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
  di.type_name = type_name(type.get());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  IP_REQUIRE(rank >= 0, "{}: cannot read the shape", where(name));
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  di.shape.assign(dims.begin(), dims.end());
  return di;
}

bool File::is_group(const std::string& name) const {
  quiet_this_thread();
  if (!exists(name)) return false;
  Handle o(H5Oopen(id(), name.c_str(), H5P_DEFAULT), H5Oclose);
  return o && H5Iget_type(o.get()) == H5I_GROUP;
}

std::vector<std::string> File::list(const std::string& group) const {
  quiet_this_thread();
  IP_REQUIRE(is_group(group), "{}: no group '{}'", path_, group);
  std::vector<std::string> names;
  IP_REQUIRE(H5Literate_by_name(id(), group.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_link, &names,
                                H5P_DEFAULT) >= 0,
             "{}: cannot list the group", where(group));
  return names;
}

void File::remove(const std::string& name) {
  quiet_this_thread();
  IP_REQUIRE(H5Ldelete(id(), name.c_str(), H5P_DEFAULT) >= 0, "{}: cannot remove", where(name));
}

void File::copy_from(const File& src, const std::string& src_name, const std::string& dst_name) {
  quiet_this_thread();
  IP_REQUIRE(H5Ocopy(src.id(), src_name.c_str(), id(), dst_name.c_str(), H5P_DEFAULT, H5P_DEFAULT) >= 0,
             "cannot copy {}:{} to {}", src.path(), src_name, where(dst_name));
}

void File::create_group(const std::string& name) {
  quiet_this_thread();
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  H5Pset_attr_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Handle g(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose);
  IP_REQUIRE(g, "{}: cannot create group{}", where(name), cause_of_failure());
}

void File::write(const std::string& name, const Tensor<float>& t) {
  quiet_this_thread();
  Handle space = dataspace(t.shape());
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  IP_REQUIRE(ds, "{}: cannot create dataset{}", where(name), cause_of_failure());
  IP_REQUIRE(t.empty() || H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) >= 0,
             "{}: write failed{}", where(name), cause_of_failure());
}

void File::write(const std::string& name, const std::vector<std::int32_t>& v, const std::vector<Index64>& shape) {
  quiet_this_thread();
  Index64 n = 1;
  for (auto s : shape) n *= s;
  IP_REQUIRE(n == static_cast<Index64>(v.size()), "{}: {} values for a shape of {} elements", where(name), v.size(), n);
  Handle space = dataspace(shape);
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  IP_REQUIRE(ds, "{}: cannot create dataset{}", where(name), cause_of_failure());
  IP_REQUIRE(v.empty() || H5Dwrite(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
             "{}: write failed{}", where(name), cause_of_failure());
}

Tensor<float> File::read_float(const std::string& name) const {
  quiet_this_thread();
  const DatasetInfo di = info(name);
  IP_REQUIRE(di.is_float, "{}: expected a floating-point dataset", where(name));
  IP_REQUIRE(!di.shape.empty() && di.shape.size() <= 3, "{}: rank {} (expected 1 to 3)", where(name), di.shape.size());
  Tensor<float> t(di.shape);
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (di.element_size > sizeof(float) && !t.empty()) {
    // Wider than float32 (float64): read as double and narrow here, so that a finite value float32 cannot
    // hold is named as such (HDF5's conversion would make it an infinity, reported as one).
    std::vector<double> wide(t.size());
    IP_REQUIRE(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()) >= 0,
               "{}: read failed", where(name));
    for (std::size_t i = 0; i < wide.size(); ++i) {
      IP_REQUIRE(!std::isfinite(wide[i]) || std::fabs(wide[i]) <= static_cast<double>(std::numeric_limits<float>::max()),
                 "{}: value {} (flat element {}) is outside float32's range, to which the arrays are read", where(name),
                 wide[i], i);
      t.data()[i] = static_cast<float>(wide[i]);
    }
    return t;
  }
  IP_REQUIRE(t.empty() || H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) >= 0,
             "{}: read failed", where(name));
  return t;
}

void File::set_attr(const std::string& object, const std::string& name, const std::string& value) {
  quiet_this_thread();
  // A fixed-length string ends at its first NUL for every reader (h5py, attr_string drops trailing ones).
  IP_REQUIRE(value.find('\0') == std::string::npos, "{}: attribute '{}': the value holds a NUL byte (at {})",
             where(object), name, value.find('\0'));
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT);
  Handle a(H5Acreate_by_name(id(), object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT),
           H5Aclose);
  IP_REQUIRE(a, "{}: cannot create attribute '{}'{}", where(object), name, cause_of_failure());
  const std::string v = value.empty() ? std::string(1, '\0') : value;
  IP_REQUIRE(H5Awrite(a.get(), type.get(), v.data()) >= 0, "{}: cannot write attribute '{}'", where(object), name);
}

void File::set_attr(const std::string& object, const std::string& name, std::int64_t value) {
  quiet_this_thread();
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
  quiet_this_thread();
  Handle a(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  IP_REQUIRE(a, "{}: no attribute '{}'", where(object), name);
  Handle type(H5Aget_type(a.get()), H5Tclose);
  IP_REQUIRE(H5Tget_class(type.get()) == H5T_STRING, "{}: attribute '{}' is not a string", where(object), name);
  // One value: H5Aread fills the whole attribute, and an array of strings overran the buffer of one.
  Handle space(H5Aget_space(a.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  IP_REQUIRE(n == 1, "{}: attribute '{}' holds {} strings, not one", where(object), name, n);
  if (H5Tis_variable_str(type.get()) > 0) {  // how h5py writes a str (attrs['note'] = 'text')
    char* p = nullptr;
    IP_REQUIRE(H5Aread(a.get(), type.get(), &p) >= 0, "{}: cannot read attribute '{}'", where(object), name);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  std::string s(H5Tget_size(type.get()), '\0');
  IP_REQUIRE(H5Aread(a.get(), type.get(), s.data()) >= 0, "{}: cannot read attribute '{}'", where(object), name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::int64_t File::attr_int(const std::string& object, const std::string& name) const {
  quiet_this_thread();
  Handle a(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  IP_REQUIRE(a, "{}: no attribute '{}'", where(object), name);
  // An integer, one of them: HDF5 converts a float by cutting it (2.5 read as 2), clamps an unsigned value past
  // int64 (2^63 read as 2^63 - 1), and an array overran the one value here.
  Handle type(H5Aget_type(a.get()), H5Tclose), space(H5Aget_space(a.get()), H5Sclose);
  IP_REQUIRE(H5Tget_class(type.get()) == H5T_INTEGER, "{}: attribute '{}' is {}, not an integer", where(object), name,
             type_name(type.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  IP_REQUIRE(n == 1, "{}: attribute '{}' holds {} values, not one integer", where(object), name, n);
  if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    std::uint64_t u = 0;
    IP_REQUIRE(H5Aread(a.get(), H5T_NATIVE_UINT64, &u) >= 0, "{}: cannot read attribute '{}' as an integer",
               where(object), name);
    IP_REQUIRE(u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
               "{}: attribute '{}' = {} is past int64", where(object), name, u);
    return static_cast<std::int64_t>(u);
  }
  std::int64_t v = 0;
  IP_REQUIRE(H5Aread(a.get(), H5T_NATIVE_INT64, &v) >= 0, "{}: cannot read attribute '{}' as an integer",
             where(object), name);
  return v;
}

std::vector<std::int32_t> File::read_int32(const std::string& name) const {
  quiet_this_thread();
  const DatasetInfo di = info(name);
  IP_REQUIRE(di.is_integer, "{}: expected an integer dataset", where(name));
  Index64 n = 1;
  for (auto d : di.shape) n *= d;
  std::vector<std::int32_t> v(n);
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (n > 0 && (di.element_size > sizeof(std::int32_t) || (di.element_size == sizeof(std::int32_t) &&
                                                           di.type_name.front() == 'u'))) {
    // Wider than int32 (int64, uint32): read wide and check, as HDF5's conversion clamps (2^32 read as
    // 2147483647) without an error.
    const bool is_unsigned = di.type_name.front() == 'u';
    std::vector<std::int64_t> wide(n);
    IP_REQUIRE(H5Dread(ds.get(), is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       wide.data()) >= 0,
               "{}: read failed", where(name));
    for (std::size_t i = 0; i < wide.size(); ++i) {
      const bool fits = is_unsigned ? static_cast<std::uint64_t>(wide[i]) <= std::numeric_limits<std::int32_t>::max()
                                    : wide[i] >= std::numeric_limits<std::int32_t>::min() &&
                                          wide[i] <= std::numeric_limits<std::int32_t>::max();
      const std::string value = is_unsigned ? std::to_string(static_cast<std::uint64_t>(wide[i]))
                                            : std::to_string(wide[i]);
      IP_REQUIRE(fits, "{}: value {} (flat element {}) is outside int32's range, to which the dataset is read",
                 where(name), value, i);
      v[i] = static_cast<std::int32_t>(wide[i]);
    }
    return v;
  }
  IP_REQUIRE(v.empty() || H5Dread(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
             "{}: read failed", where(name));
  return v;
}

bool File::has_attr(const std::string& object, const std::string& name) const {
  quiet_this_thread();
  return H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> File::attr_names(const std::string& object) const {
  quiet_this_thread();
  std::vector<std::string> names;
  Handle o(H5Oopen(id(), object.c_str(), H5P_DEFAULT), H5Oclose);
  IP_REQUIRE(o, "{}: no object", where(object));
  // Creation order is tracked only when asked for at creation; fall back to name order.
  if (H5Aiterate2(o.get(), H5_INDEX_CRT_ORDER, H5_ITER_INC, nullptr, collect_attr, &names) < 0) {
    names.clear();
    IP_REQUIRE(H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &names) >= 0,
               "{}: cannot list attributes", where(object));
  }
  return names;
}

std::string File::attr_text(const std::string& object, const std::string& name) const {
  quiet_this_thread();
  Handle a(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  IP_REQUIRE(a, "{}: no attribute '{}'", where(object), name);
  Handle type(H5Aget_type(a.get()), H5Tclose), space(H5Aget_space(a.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n != 1) return fmt::format("({} values)", n);
  switch (H5Tget_class(type.get())) {
    case H5T_STRING:
      return attr_string(object, name);
    case H5T_INTEGER:
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
        std::uint64_t u = 0;
        IP_REQUIRE(H5Aread(a.get(), H5T_NATIVE_UINT64, &u) >= 0, "{}: cannot read attribute '{}'", where(object), name);
        return std::to_string(u);
      }
      return std::to_string(attr_int(object, name));
    case H5T_FLOAT: {
      double v = 0;
      IP_REQUIRE(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) >= 0, "{}: cannot read attribute '{}'", where(object), name);
      return fmt::format("{}", v);
    }
    default: return fmt::format("({})", type_name(type.get()));
  }
}

void File::remove_attr(const std::string& object, const std::string& name) {
  quiet_this_thread();
  if (!has_attr(object, name)) return;
  IP_REQUIRE(H5Adelete_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) >= 0, "{}: cannot remove attribute '{}'",
             where(object), name);
}

void File::copy_attrs_from(const File& src, const std::string& src_object, const std::string& dst_object) {
  quiet_this_thread();
  for (const auto& name : src.attr_names(src_object)) {
    Handle a(H5Aopen_by_name(src.id(), src_object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    Handle type(H5Aget_type(a.get()), H5Tclose), space(H5Aget_space(a.get()), H5Sclose);
    // Variable-length strings (h5py's str) are copied as they are: read as pointers HDF5 allocates, written
    // back, freed. Other variable-length data is refused.
    const bool vstr = a && H5Tis_variable_str(type.get()) > 0;
    IP_REQUIRE(a && (vstr || H5Tdetect_class(type.get(), H5T_VLEN) <= 0),
               "{}:{}: attribute '{}' cannot be copied (variable-length)", src.path(), src_object, name);
    std::vector<char> buf(H5Tget_size(type.get()) * std::max<hssize_t>(1, H5Sget_simple_extent_npoints(space.get())));
    IP_REQUIRE(H5Aread(a.get(), type.get(), buf.data()) >= 0, "{}:{}: cannot read attribute '{}'", src.path(),
               src_object, name);
    struct Reclaim {  // the strings HDF5 allocated for a variable-length read, freed however this loop ends
      hid_t type, space;
      void* buf;
      ~Reclaim() {
        if (!buf) return;
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(type, space, H5P_DEFAULT, buf);
#else
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
#endif
      }
    } reclaim{type.get(), space.get(), vstr ? buf.data() : nullptr};
    if (has_attr(dst_object, name)) H5Adelete_by_name(id(), dst_object.c_str(), name.c_str(), H5P_DEFAULT);
    Handle b(H5Acreate_by_name(id(), dst_object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    IP_REQUIRE(b && H5Awrite(b.get(), type.get(), buf.data()) >= 0, "{}: cannot write attribute '{}'",
               where(dst_object), name);
  }
}

}  // namespace ip::h5
