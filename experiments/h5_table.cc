// Tables of the HDF5 wrapper: 1-D compound datasets of fixed-length byte strings, int64 and float64.
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "experiments/h5.h"

namespace ip::h5 {

void quiet_this_thread();  // h5.cc: no printing of HDF5's error stack in the calling thread

namespace {

// Width of a stored string column: the next power of two >= the longest value, at least 8.
std::size_t string_width(const std::vector<std::string>& v) {
  std::size_t longest = 1, w = 8;
  for (const auto& s : v) longest = std::max(longest, s.size());
  while (w < longest) w *= 2;
  return w;
}

Handle string_type(std::size_t width, H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), width);
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  H5Tset_cset(t.get(), cset);
  return t;
}

// A packed compound type of the columns; string widths from `widths` (one per column, 0 for numbers).
// `where` names the table in the error when a member cannot be added (a name empty or given twice: HDF5
// refuses it, and the table lost that column without a word). `csets`, when given, holds each string column's
// character set (HDF5 has no conversion between ASCII and UTF-8 strings: a reader matches the file's).
Handle compound_type(const Table& t, const std::vector<std::size_t>& widths, bool file_type, const std::string& where,
                     const std::vector<H5T_cset_t>* csets = nullptr) {
  std::size_t size = 0;
  for (std::size_t c = 0; c < t.columns.size(); ++c) size += widths[c] ? widths[c] : 8;
  Handle type(H5Tcreate(H5T_COMPOUND, size), H5Tclose);
  std::size_t off = 0;
  for (std::size_t c = 0; c < t.columns.size(); ++c) {
    const Column& col = t.columns[c];
    herr_t ok;
    if (col.kind == Column::Kind::kString) {
      ok = H5Tinsert(type.get(), col.name.c_str(), off,
                     string_type(widths[c], csets ? (*csets)[c] : H5T_CSET_UTF8).get());
    } else {
      const bool i = col.kind == Column::Kind::kInt64;
      ok = H5Tinsert(type.get(), col.name.c_str(), off,
                     file_type ? (i ? H5T_STD_I64LE : H5T_IEEE_F64LE) : (i ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE));
    }
    IP_REQUIRE(ok >= 0, "{}: column '{}' cannot be stored (an empty name, or one given twice)", where, col.name);
    off += widths[c] ? widths[c] : 8;
  }
  return type;
}

// Rows packed into one buffer matching compound_type(t, widths, false).
std::vector<char> pack(const Table& t, const std::vector<std::size_t>& widths) {
  std::size_t row = 0;
  for (auto w : widths) row += w ? w : 8;
  const std::size_t n = t.rows();
  std::vector<char> buf(row * n, '\0');
  std::size_t off = 0;
  for (std::size_t c = 0; c < t.columns.size(); ++c) {
    const Column& col = t.columns[c];
    char* p = buf.data() + off;
    for (std::size_t r = 0; r < n; ++r, p += row) {
      if (col.kind == Column::Kind::kString)
        std::memcpy(p, col.strings[r].data(), col.strings[r].size());
      else if (col.kind == Column::Kind::kInt64)
        std::memcpy(p, &col.ints[r], 8);
      else
        std::memcpy(p, &col.floats[r], 8);
    }
    off += widths[c] ? widths[c] : 8;
  }
  return buf;
}

// A string with a NUL inside would come back cut there (a fixed-length string ends at its first NUL).
void require_no_nul(const Table& t, const std::string& where) {
  for (const Column& col : t.columns) {
    if (col.kind != Column::Kind::kString) continue;
    for (std::size_t r = 0; r < col.strings.size(); ++r)
      IP_REQUIRE(col.strings[r].find('\0') == std::string::npos,
                 "{}: column '{}', row {}: the string holds a NUL byte (at {}), which a stored string cannot", where,
                 col.name, r, col.strings[r].find('\0'));
  }
}

}  // namespace

std::size_t Column::size() const {
  return kind == Kind::kString ? strings.size() : kind == Kind::kInt64 ? ints.size() : floats.size();
}

Column& Table::add(const std::string& name, Column::Kind kind) {
  columns.push_back(Column{name, kind, {}, {}, {}});
  return columns.back();
}

const Column& Table::column(const std::string& name) const {
  for (const auto& c : columns)
    if (c.name == name) return c;
  throw Error(fmt::format("table has no column '{}'", name));
}

void File::write_table(const std::string& name, const Table& t, Index64 chunk_rows) {
  quiet_this_thread();
  IP_REQUIRE(!t.columns.empty(), "{}: a table needs at least one column", where(name));
  std::vector<std::size_t> widths;
  for (const auto& c : t.columns) {
    IP_REQUIRE(c.size() == t.rows(), "{}: column '{}' has {} rows, expected {}", where(name), c.name, c.size(),
               t.rows());
    widths.push_back(c.kind == Column::Kind::kString ? string_width(c.strings) : 0);
  }
  require_no_nul(t, where(name));
  const hsize_t n = t.rows(), unlimited = H5S_UNLIMITED;
  Handle space(H5Screate_simple(1, &n, chunk_rows > 0 ? &unlimited : nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (chunk_rows > 0) {
    const hsize_t chunk = chunk_rows;
    H5Pset_chunk(dcpl.get(), 1, &chunk);
  }
  Handle ftype = compound_type(t, widths, true, where(name)), mtype = compound_type(t, widths, false, where(name));
  Handle ds(H5Dcreate2(id(), name.c_str(), ftype.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
  IP_REQUIRE(ds, "{}: cannot create table{}", where(name), cause_of_failure());
  const std::vector<char> buf = pack(t, widths);
  IP_REQUIRE(n == 0 || H5Dwrite(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0,
             "{}: write failed{}", where(name), cause_of_failure());
}

bool File::append_table(const std::string& name, const Table& t) {
  quiet_this_thread();
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  IP_REQUIRE(ds, "{}: no table", where(name));
  Handle ftype(H5Dget_type(ds.get()), H5Tclose);
  if (H5Tget_class(ftype.get()) != H5T_COMPOUND || H5Tget_nmembers(ftype.get()) != static_cast<int>(t.columns.size()))
    return false;
  std::vector<std::size_t> widths;
  for (std::size_t c = 0; c < t.columns.size(); ++c) {
    const Column& col = t.columns[c];
    char* mname = H5Tget_member_name(ftype.get(), c);
    const bool same_name = col.name == mname;
    H5free_memory(mname);
    Handle mt(H5Tget_member_type(ftype.get(), c), H5Tclose);
    const H5T_class_t cls = H5Tget_class(mt.get());
    const bool is_string = col.kind == Column::Kind::kString;
    if (!same_name ||
        (is_string ? cls != H5T_STRING : cls != (col.kind == Column::Kind::kInt64 ? H5T_INTEGER : H5T_FLOAT)))
      return false;
    // Members of another writer (h5py) that HDF5 would fill by converting: a variable-length string (the
    // write failed after the table had grown), a narrower or unsigned number (clamped without an error).
    if (is_string ? H5Tis_variable_str(mt.get()) != 0
                  : H5Tget_size(mt.get()) != 8 || (cls == H5T_INTEGER && H5Tget_sign(mt.get()) != H5T_SGN_2))
      return false;
    // A string member padded otherwise than ours (h5py and C writers use NULL-terminated ones): HDF5's
    // conversion would cut a string that fills its whole width by its last byte, without an error. One in
    // ASCII (numpy's 'S' through h5py): HDF5 converts no UTF-8 string to it (the write fails).
    if (is_string &&
        (H5Tget_strpad(mt.get()) != H5T_STR_NULLPAD || H5Tget_cset(mt.get()) != H5T_CSET_UTF8))
      return false;
    widths.push_back(is_string ? H5Tget_size(mt.get()) : 0);
    if (is_string)
      for (const auto& s : col.strings)
        if (s.size() > widths.back()) return false;
  }
  Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return false;
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.get()) != 1) return false;
  hsize_t old = 0, most = 0;
  H5Sget_simple_extent_dims(space.get(), &old, &most);
  const hsize_t add = t.rows(), total = old + add;
  if (add == 0) return true;
  // Chunked but not extendible that far (h5py chunks every compressed dataset, with maxshape = shape).
  if (most != H5S_UNLIMITED && most < total) return false;
  require_no_nul(t, where(name));
  IP_REQUIRE(H5Dset_extent(ds.get(), &total) >= 0, "{}: cannot extend the table", where(name));
  Handle fspace(H5Dget_space(ds.get()), H5Sclose);
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &old, nullptr, &add, nullptr);
  Handle mspace(H5Screate_simple(1, &add, nullptr), H5Sclose);
  Handle mtype = compound_type(t, widths, false, where(name));
  const std::vector<char> buf = pack(t, widths);
  if (H5Dwrite(ds.get(), mtype.get(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
    const std::string cause = cause_of_failure();
    H5Dset_extent(ds.get(), &old);  // no rows of fill values left behind
    throw Error(fmt::format("{}: append failed{}", where(name), cause));
  }
  return true;
}

Table File::read_table(const std::string& name) const {
  quiet_this_thread();
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  IP_REQUIRE(ds, "{}: no table", where(name));
  Handle ftype(H5Dget_type(ds.get()), H5Tclose);
  IP_REQUIRE(H5Tget_class(ftype.get()) == H5T_COMPOUND, "{}: not a table (a table is a compound dataset; this one is {})", where(name),
             info(name).type_name);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  IP_REQUIRE(H5Sget_simple_extent_ndims(space.get()) == 1, "{}: a table must have rank 1", where(name));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  Table t;
  std::vector<std::size_t> widths;
  std::vector<H5T_cset_t> csets;  // a string member's character set, read as it is stored
  std::vector<std::size_t> wide_unsigned;  // unsigned members of 8 bytes or more (another writer's uint64)
  for (int m = 0; m < H5Tget_nmembers(ftype.get()); ++m) {
    char* mname = H5Tget_member_name(ftype.get(), m);
    const std::string cname = mname;
    H5free_memory(mname);
    Handle mt(H5Tget_member_type(ftype.get(), m), H5Tclose);
    const H5T_class_t cls = H5Tget_class(mt.get());
    IP_REQUIRE(cls == H5T_INTEGER || cls == H5T_FLOAT || (cls == H5T_STRING && H5Tis_variable_str(mt.get()) <= 0),
               "{}: column '{}' has an unsupported type", where(name), cname);
    IP_REQUIRE(cls != H5T_INTEGER || H5Tget_size(mt.get()) <= 8,
               "{}: column '{}' has integers of {} bytes, wider than the int64 it is read as", where(name), cname,
               H5Tget_size(mt.get()));
    if (cls == H5T_INTEGER && H5Tget_sign(mt.get()) == H5T_SGN_NONE && H5Tget_size(mt.get()) == 8)
      wide_unsigned.push_back(static_cast<std::size_t>(m));
    t.add(cname, cls == H5T_STRING    ? Column::Kind::kString
                 : cls == H5T_INTEGER ? Column::Kind::kInt64
                                      : Column::Kind::kFloat64);
    widths.push_back(cls == H5T_STRING ? H5Tget_size(mt.get()) : 0);
    csets.push_back(cls == H5T_STRING ? H5Tget_cset(mt.get()) : H5T_CSET_UTF8);
  }
  Handle mtype = compound_type(t, widths, false, where(name), &csets);
  const std::size_t row = H5Tget_size(mtype.get());
  std::vector<char> buf(row * n);
  IP_REQUIRE(n == 0 || H5Dread(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0,
             "{}: read failed", where(name));
  // HDF5 converts a uint64 above INT64_MAX to INT64_MAX without an error: read those members as they are
  // stored and refuse such a value.
  for (const std::size_t c : wide_unsigned) {
    Handle one(H5Tcreate(H5T_COMPOUND, 8), H5Tclose);
    H5Tinsert(one.get(), t.columns[c].name.c_str(), 0, H5T_NATIVE_UINT64);
    std::vector<std::uint64_t> u(n);
    IP_REQUIRE(n == 0 || H5Dread(ds.get(), one.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, u.data()) >= 0,
               "{}: read failed", where(name));
    for (hsize_t r = 0; r < n; ++r)
      IP_REQUIRE(u[r] <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                 "{}: column '{}' row {} holds {}, outside int64's range, to which the table is read", where(name),
                 t.columns[c].name, r, u[r]);
  }
  std::size_t off = 0;
  for (std::size_t c = 0; c < t.columns.size(); ++c) {
    Column& col = t.columns[c];
    const char* p = buf.data() + off;
    for (hsize_t r = 0; r < n; ++r, p += row) {
      if (col.kind == Column::Kind::kString) {
        col.strings.emplace_back(p, strnlen(p, widths[c]));
      } else if (col.kind == Column::Kind::kInt64) {
        std::int64_t v;
        std::memcpy(&v, p, 8);
        col.ints.push_back(v);
      } else {
        double v;
        std::memcpy(&v, p, 8);
        col.floats.push_back(v);
      }
    }
    off += widths[c] ? widths[c] : 8;
  }
  return t;
}

}  // namespace ip::h5
