// The HDF5 wrapper (experiments/h5.h) on bad input: files that are not HDF5, cut short or damaged; objects and
// attributes missing or of another type than asked for (as a results file edited by h5py has); tables with no
// rows, odd strings and names, string columns that outgrow their width. Every failure is an ip::Error naming
// the file and the object, with nothing from HDF5 itself on stderr; no data comes back silently changed.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "core/error.h"
#include "experiments/h5.h"

namespace {

namespace fs = std::filesystem;

// HDF5 1.10 loses some of its own allocations when it meets damaged headers (a plain C program that only
// opens such files and reads their datasets leaks the same way under LeakSanitizer). In an AddressSanitizer
// build (make test-sanitize) what this thread allocates while one of these lives is not counted as a leak;
// elsewhere it does nothing. HDF5 recycles freed blocks through its free lists, so a block lost there may
// have been allocated before: H5garbage_collect() first releases them.
struct HdfLeaksOnDamagedFilesIgnored {
#if defined(__SANITIZE_ADDRESS__)
  HdfLeaksOnDamagedFilesIgnored() { __lsan_disable(); }
  ~HdfLeaksOnDamagedFilesIgnored() { __lsan_enable(); }
#endif
};

using ip::h5::Column;
using ip::h5::File;
using ip::h5::Table;
using Kind = Column::Kind;

class H5Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ip_h5_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// Runs f, which must throw ip::Error whose message holds every one of `parts`, with nothing on stderr.
template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  ::testing::internal::CaptureStderr();
  std::string what;
  try {
    f();
  } catch (const ip::Error& e) {
    what = e.what();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(what, "") << "no ip::Error thrown";
  for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  EXPECT_EQ(err, "") << "stderr: " << err;
}

// append_table's answer, which must come without an error and with nothing on stderr (a failure is added
// otherwise, and true returned).
bool append_answer(File& f, const std::string& name, const Table& t) {
  bool appended = true;
  ::testing::internal::CaptureStderr();
  try {
    appended = f.append_table(name, t);
  } catch (const ip::Error& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  return appended;
}

Table sample(std::size_t rows, const std::string& prefix = "s") {
  Table t;
  t.add("key", Kind::kString);
  t.add("index", Kind::kInt64);
  t.add("value", Kind::kFloat64);
  auto& k = t.columns[0];
  auto& i = t.columns[1];
  auto& x = t.columns[2];
  for (std::size_t r = 0; r < rows; ++r) {
    k.strings.push_back(prefix + std::to_string(r));
    i.ints.push_back(static_cast<std::int64_t>(r) - 3);
    x.floats.push_back(0.25 * static_cast<double>(r));
  }
  return t;
}

// Writes `n` values of `mem_type` as a scalar (n == 0) or 1-D attribute `name` of "/", stored as `file_type`.
void raw_attr(File& f, const std::string& name, hid_t file_type, hid_t mem_type, const void* data, hsize_t n) {
  const hid_t space = n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  const hid_t a = H5Acreate2(f.id(), name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  ASSERT_GE(H5Awrite(a, mem_type, data), 0);
  H5Aclose(a);
  H5Sclose(space);
}

TEST_F(H5Test, FilesThatAreNotHdf5AreNamed) {
  const auto empty = path("empty.h5"), text = path("text.h5");
  std::ofstream(empty).close();
  std::ofstream(text) << "not an HDF5 file\n";
  for (const auto& p : {empty, text}) {
    expect_error([&] { File f(p, "r"); }, {p, "not a readable HDF5 file"});
    expect_error([&] { File f(p, "a"); }, {p, "not a readable HDF5 file"});
  }
  EXPECT_EQ(fs::file_size(empty), 0u);  // opened read-write, it had been made a new HDF5 file
  expect_error([&] { File f(path("missing.h5"), "r"); }, {path("missing.h5"), "does not exist"});
  expect_error([&] { File f(path("no/such/dir/x.h5"), "w"); }, {path("no/such/dir/x.h5"), "No such file"});
  expect_error([&] { File f(dir_.string(), "r"); }, {dir_.string(), "directory"});
  expect_error([&] { File f(path("x.h5"), "rw"); }, {path("x.h5"), "unknown open mode"});
  {
    File f(path("x.h5"), "w");
  }
  expect_error([&] { File f(path("x.h5"), "x"); }, {path("x.h5"), "mode 'x'"});
}

// A file cut short (a copy that stopped half way) or with its metadata overwritten: an error naming the file,
// never a crash or HDF5's error stack on stderr.
TEST_F(H5Test, TruncatedAndDamagedFilesFailCleanly) {
  H5garbage_collect();
  [[maybe_unused]] const HdfLeaksOnDamagedFilesIgnored hdf5_leaks;
  const auto good = path("good.h5");
  {
    File f(good, "w");
    f.write_table("points", sample(2000), 64);
    f.set_attr("/", "sweep_id", std::string("sweep-A"));
    f.create_group("g");
    f.set_attr("g", "n", std::int64_t{7});
  }
  const auto size = fs::file_size(good);
  for (const std::uintmax_t keep : {std::uintmax_t{0}, std::uintmax_t{8}, std::uintmax_t{512}, size / 2, size - 1}) {
    const auto cut = path("cut.h5");
    fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    expect_error(
        [&] {
          File f(cut, "r");
          f.read_table("points");
          f.attr_int("g", "n");
        },
        {cut});
  }
  // Cut in half, the superblock reads: HDF5's reason comes with the message.
  const auto half = path("half.h5");
  fs::copy_file(good, half, fs::copy_options::overwrite_existing);
  fs::resize_file(half, size / 2);
  expect_error([&] { File f(half, "r"); }, {half, "mode 'r'", "truncated file"});
  expect_error([&] { File f(half, "a"); }, {half, "mode 'a'", "truncated file"});
  // Random bytes over the first 2 KiB (superblock, root group, object headers): any outcome but a crash,
  // HDF5's own printing, or an error not naming the file.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const auto bad = path("bad.h5");
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    {
      std::fstream io(bad, std::ios::in | std::ios::out | std::ios::binary);
      const std::streamoff at = static_cast<std::streamoff>(rng() % 2048);
      io.seekp(at);
      for (int b = 0; b < 16; ++b) io.put(static_cast<char>(rng()));
    }
    ::testing::internal::CaptureStderr();
    try {
      File f(bad, "r");
      f.read_table("points");
      f.attr_string("/", "sweep_id");
      f.attr_int("g", "n");
    } catch (const ip::Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "trial " << trial;
  }
}

TEST_F(H5Test, MissingObjectsAndAttributesAreNamed) {
  const auto p = path("f.h5");
  File f(p, "w");
  f.write_table("t", sample(3));
  f.set_attr("/", "n", std::int64_t{3});
  expect_error([&] { f.read_table("nope"); }, {p, "nope"});
  expect_error([&] { f.read_table("no/such/group"); }, {p, "no/such/group"});
  expect_error([&] { f.info("nope"); }, {p, "nope"});
  expect_error([&] { f.read_float("t"); }, {p, "t", "floating-point"});
  expect_error([&] { f.read_int32("t"); }, {p, "t", "integer"});
  expect_error([&] { f.attr_int("/", "missing"); }, {p, "missing"});
  expect_error([&] { f.attr_string("t", "missing"); }, {p, "t", "missing"});
  expect_error([&] { f.attr_text("nope", "n"); }, {p, "nope", "n"});
  expect_error([&] { f.attr_names("nope"); }, {p, "nope"});
  expect_error([&] { f.list("t"); }, {p, "t"});
  expect_error([&] { f.remove("nope"); }, {p, "nope"});
  expect_error([&] { f.append_table("nope", sample(1)); }, {p, "nope"});
  expect_error([&] { f.set_attr("nope", "a", std::int64_t{1}); }, {p, "nope", "a"});
  expect_error([&] { f.set_attr("nope", "a", std::string("x")); }, {p, "nope", "a"});
  File g(path("g.h5"), "w");
  expect_error([&] { g.copy_from(f, "nope", "x"); }, {p, "nope", "x"});
  expect_error([&] { g.copy_attrs_from(f, "nope", "/"); }, {p, "nope"});
  EXPECT_FALSE(f.has_attr("nope", "n"));
  EXPECT_FALSE(f.exists("no/such/thing"));
  EXPECT_NO_THROW(f.remove_attr("/", "missing"));
}

// A file opened read-only: writes fail naming the file and the object, with HDF5's reason.
TEST_F(H5Test, WritesToAFileOpenedReadOnlyFail) {
  const auto p = path("ro.h5");
  {
    File f(p, "w");
    f.write_table("t", sample(3), 4);
    f.set_attr("/", "n", std::int64_t{1});
  }
  File f(p, "r");
  expect_error([&] { f.write_table("u", sample(1)); }, {p, "u", "no write intent"});
  expect_error([&] { f.append_table("t", sample(1)); }, {p, "t"});
  expect_error([&] { f.set_attr("/", "m", std::int64_t{2}); }, {p, "m"});
  expect_error([&] { f.set_attr("/", "m", std::string("v")); }, {p, "m"});
  expect_error([&] { f.create_group("g"); }, {p, "g"});
  expect_error([&] { f.remove("t"); }, {p, "t"});
  EXPECT_EQ(f.read_table("t").rows(), 3u);
  EXPECT_EQ(f.attr_int("/", "n"), 1);
}

// Attributes of another type or shape than asked for (a file edited with h5py): an error, never a value
// converted by HDF5 (a float cut to an integer) or a read past the caller's buffer (an array attribute).
TEST_F(H5Test, AttributesOfAnotherTypeOrShapeAreRefused) {
  const auto p = path("attrs.h5");
  File f(p, "w");
  f.set_attr("/", "i", std::int64_t{42});
  f.set_attr("/", "s", std::string("text"));
  const double half = 2.5;
  raw_attr(f, "f", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &half, 0);
  const std::int64_t three[3] = {1, 2, 3};
  raw_attr(f, "ints", H5T_STD_I64LE, H5T_NATIVE_INT64, three, 3);
  const hid_t s4 = H5Tcopy(H5T_C_S1);
  H5Tset_size(s4, 4);
  const char words[] = "abcdefghijkl";
  raw_attr(f, "strs", s4, s4, words, 3);
  H5Tclose(s4);
  const std::uint64_t huge = 1ull << 63;
  raw_attr(f, "u", H5T_STD_U64LE, H5T_NATIVE_UINT64, &huge, 0);

  expect_error([&] { f.attr_string("/", "i"); }, {p, "'i'", "not a string"});
  expect_error([&] { f.attr_int("/", "s"); }, {p, "'s'"});
  expect_error([&] { f.attr_int("/", "f"); }, {p, "'f'"});
  expect_error([&] { f.attr_int("/", "ints"); }, {p, "'ints'"});
  expect_error([&] { f.attr_string("/", "strs"); }, {p, "'strs'"});
  expect_error([&] { f.attr_int("/", "u"); }, {p, "'u'"});
  EXPECT_EQ(f.attr_int("/", "i"), 42);
  EXPECT_EQ(f.attr_string("/", "s"), "text");
  EXPECT_EQ(f.attr_text("/", "f"), "2.5");
  EXPECT_EQ(f.attr_text("/", "ints"), "(3 values)");
  // A narrower integer (numpy's int32, h5py's default for a small Python int on some platforms) reads.
  const std::int32_t small = -5;
  raw_attr(f, "i32", H5T_STD_I32LE, H5T_NATIVE_INT32, &small, 0);
  EXPECT_EQ(f.attr_int("/", "i32"), -5);
}

// Strings as stored: every byte value but NUL, up to 1 MB; an empty string; attributes the same.
TEST_F(H5Test, StringsRoundTripOrAreRefused) {
  const auto p = path("strings.h5");
  File f(p, "w");
  Table t;
  auto& s = t.add("s", Kind::kString);
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  s.strings = {"", "plain", "\xff\xfe not UTF-8 \xc3", all, std::string(1 << 20, 'x'), std::string(8, 'y')};
  f.write_table("t", t);
  EXPECT_EQ(f.info("t").type_name, "compound{s: bytes[1048576]}");
  const Table back = f.read_table("t");
  ASSERT_EQ(back.rows(), s.strings.size());
  for (std::size_t r = 0; r < s.strings.size(); ++r) EXPECT_EQ(back.columns[0].strings[r], s.strings[r]) << r;

  f.set_attr("/", "bytes", all);
  EXPECT_EQ(f.attr_string("/", "bytes"), all);
  f.set_attr("/", "empty", std::string());
  EXPECT_EQ(f.attr_string("/", "empty"), "");
  f.set_attr("/", "big", std::string(1 << 20, 'z'));  // past the 64 KiB of an object header's message
  EXPECT_EQ(f.attr_string("/", "big"), std::string(1 << 20, 'z'));

  // A NUL inside a value would come back cut there (a fixed-length string ends at its first NUL): refused.
  Table nul;
  nul.add("name", Kind::kString).strings = {"ok", std::string("a\0b", 3)};
  expect_error([&] { f.write_table("nul", nul); }, {p, "nul", "name", "NUL"});
  EXPECT_FALSE(f.exists("nul"));
  f.write_table("nul2", sample(1), 8);
  Table nul_row = sample(1);
  nul_row.columns[0].strings[0] = std::string("x\0", 2);
  expect_error([&] { f.append_table("nul2", nul_row); }, {p, "nul2", "key", "NUL"});
  EXPECT_EQ(f.read_table("nul2").rows(), 1u);
  expect_error([&] { f.set_attr("/", "a", std::string("a\0", 2)); }, {p, "'a'", "NUL"});
}

TEST_F(H5Test, EmptyTablesAndColumns) {
  const auto p = path("empty.h5");
  File f(p, "w");
  for (ip::Index64 chunk : {ip::Index64{0}, ip::Index64{16}}) {
    const std::string name = "t" + std::to_string(chunk);
    f.write_table(name, sample(0), chunk);
    const Table back = f.read_table(name);
    EXPECT_EQ(back.rows(), 0u);
    ASSERT_EQ(back.columns.size(), 3u);
    EXPECT_EQ(back.columns[0].name, "key");
    EXPECT_EQ(back.columns[1].kind, Kind::kInt64);
    EXPECT_EQ(back.columns[2].kind, Kind::kFloat64);
    EXPECT_EQ(f.info(name).shape, std::vector<ip::Index64>{0});
  }
  EXPECT_TRUE(f.append_table("t16", sample(0)));
  EXPECT_FALSE(f.append_table("t0", sample(2)));  // not extendible
  EXPECT_TRUE(f.append_table("t16", sample(5)));
  EXPECT_EQ(f.read_table("t16").rows(), 5u);
  EXPECT_EQ(f.read_table("t16").columns[1].ints, (std::vector<std::int64_t>{-3, -2, -1, 0, 1}));
  expect_error([&] { f.write_table("none", Table{}); }, {p, "none", "at least one column"});
  Table ragged = sample(3);
  ragged.columns[2].floats.pop_back();
  expect_error([&] { f.write_table("ragged", ragged); }, {p, "ragged", "value"});
  EXPECT_FALSE(f.exists("ragged"));
}

// Column names HDF5 cannot hold apart (two the same, an empty one): refused, not a column lost.
TEST_F(H5Test, DuplicateOrEmptyColumnNamesAreRefused) {
  const auto p = path("cols.h5");
  File f(p, "w");
  Table dup;
  dup.add("a", Kind::kInt64).ints = {1};
  dup.add("a", Kind::kFloat64).floats = {2.0};
  expect_error([&] { f.write_table("dup", dup); }, {p, "dup", "'a'"});
  Table unnamed;
  unnamed.add("", Kind::kInt64).ints = {1};
  expect_error([&] { f.write_table("unnamed", unnamed); }, {p, "unnamed"});
  // Names with '.', spaces, '/' and non-ASCII bytes are members' names like any other.
  Table odd;
  odd.add("a.b", Kind::kInt64).ints = {1};
  odd.add("c/d", Kind::kFloat64).floats = {2.0};
  odd.add("é x", Kind::kString).strings = {"v"};
  f.write_table("odd", odd);
  const Table back = f.read_table("odd");
  ASSERT_EQ(back.columns.size(), 3u);
  EXPECT_EQ(back.columns[1].name, "c/d");
  EXPECT_EQ(back.column("é x").strings[0], "v");
}

// Dataset names: '/' makes a path (its groups must exist), '.' is the group itself.
TEST_F(H5Test, DatasetNamesWithSlashesAndDots) {
  const auto p = path("names.h5");
  File f(p, "w");
  expect_error([&] { f.write_table("no/group", sample(1)); }, {p, "no/group"});
  f.create_group("g");
  f.write_table("g/t.v1", sample(2));
  EXPECT_TRUE(f.exists("g/t.v1"));
  EXPECT_EQ(f.list("g"), std::vector<std::string>{"t.v1"});
  EXPECT_EQ(f.read_table("/g/t.v1").rows(), 2u);
  expect_error([&] { f.write_table(".", sample(1)); }, {p, "."});
  expect_error([&] { f.write_table("g", sample(1)); }, {p, "g"});  // exists already
  expect_error([&] { f.create_group("g"); }, {p, "g"});
}

// A string longer than its column's stored width: append_table refuses, writing nothing; a string of exactly
// that width appends (no terminator needed).
TEST_F(H5Test, StringWiderThanItsColumnIsNotAppended) {
  const auto p = path("widen.h5");
  File f(p, "w");
  Table t = sample(2);
  t.columns[0].strings = {"ab", std::string(9, 'c')};  // width 16
  f.write_table("t", t, 4);
  EXPECT_EQ(f.info("t").type_name, "compound{key: bytes[16], index: int64, value: float64}");
  Table fits = sample(3);
  fits.columns[0].strings = {std::string(16, 'd'), "", "e"};
  EXPECT_TRUE(f.append_table("t", fits));
  Table wide = sample(2);
  wide.columns[0].strings = {"f", std::string(17, 'g')};
  EXPECT_FALSE(f.append_table("t", wide));
  const Table back = f.read_table("t");
  ASSERT_EQ(back.rows(), 5u);
  EXPECT_EQ(back.columns[0].strings,
            (std::vector<std::string>{"ab", std::string(9, 'c'), std::string(16, 'd'), "", "e"}));
  EXPECT_EQ(back.columns[1].ints, (std::vector<std::int64_t>{-3, -2, -3, -2, -1}));
  // Widths: the next power of two >= the longest value, at least 8.
  const std::vector<std::pair<std::size_t, int>> widths = {{0, 8}, {8, 8}, {9, 16}, {32, 32}, {33, 64}};
  for (const auto& [len, width] : widths) {
    Table w;
    w.add("s", Kind::kString).strings = {std::string(len, 'w')};
    const std::string name = "w" + std::to_string(len);
    f.write_table(name, w);
    EXPECT_EQ(f.info(name).type_name, "compound{s: bytes[" + std::to_string(width) + "]}") << len;
  }
  // Columns that differ (order, name, kind, count): false, nothing written.
  Table other = sample(1);
  std::swap(other.columns[1], other.columns[2]);
  EXPECT_FALSE(f.append_table("t", other));
  other = sample(1);
  other.columns[1].name = "idx";
  EXPECT_FALSE(f.append_table("t", other));
  other = sample(1);
  other.columns[2].kind = Kind::kInt64;
  other.columns[2].ints = {1};
  EXPECT_FALSE(f.append_table("t", other));
  other = sample(1);
  other.columns.pop_back();
  EXPECT_FALSE(f.append_table("t", other));
  EXPECT_EQ(f.read_table("t").rows(), 5u);
}

// Tables made by another writer (h5py): a chunked dataset that cannot grow (h5py chunks every compressed
// dataset, with maxshape = shape) is "not extendible" (false), and a narrower numeric member is not filled by
// HDF5's clamping conversion (false: the caller rewrites the table).
TEST_F(H5Test, AppendToATableOfAnotherWriter) {
  const auto p = path("other.h5");
  File f(p, "w");
  const hid_t type = H5Tcreate(H5T_COMPOUND, 12);
  H5Tinsert(type, "index", 0, H5T_STD_I32LE);
  H5Tinsert(type, "value", 4, H5T_IEEE_F64LE);
  const hsize_t n = 2, chunk = 2, unlimited = H5S_UNLIMITED;
  for (const bool grows : {false, true}) {
    const hid_t space = H5Screate_simple(1, &n, grows ? &unlimited : nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    const hid_t ds = H5Dcreate2(f.id(), grows ? "grows" : "fixed", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  H5Tclose(type);
  Table row;
  row.add("index", Kind::kInt64).ints = {1};
  row.add("value", Kind::kFloat64).floats = {0.5};
  EXPECT_FALSE(append_answer(f, "fixed", row));
  EXPECT_EQ(f.info("fixed").shape, std::vector<ip::Index64>{2});
  row.columns[0].ints = {std::int64_t{1} << 40};  // int32 would clamp it
  EXPECT_FALSE(f.append_table("grows", row));
  EXPECT_EQ(f.info("grows").shape, std::vector<ip::Index64>{2});
  // Read: a narrower integer member widens exactly.
  const Table back = f.read_table("grows");
  EXPECT_EQ(back.columns[0].kind, Kind::kInt64);
  EXPECT_EQ(back.columns[0].ints, (std::vector<std::int64_t>{0, 0}));
  // A variable-length string member (h5py's str): not appended to, and the table does not grow.
  const hid_t vstr = H5Tcopy(H5T_C_S1);
  H5Tset_size(vstr, H5T_VARIABLE);
  const hid_t vtype = H5Tcreate(H5T_COMPOUND, sizeof(char*));
  H5Tinsert(vtype, "key", 0, vstr);
  const hid_t space = H5Screate_simple(1, &n, &unlimited);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  const hid_t ds = H5Dcreate2(f.id(), "vlen", vtype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(vtype);
  H5Tclose(vstr);
  Table key;
  key.add("key", Kind::kString).strings = {"abc"};
  EXPECT_FALSE(append_answer(f, "vlen", key));
  EXPECT_EQ(f.info("vlen").shape, std::vector<ip::Index64>{2});
  expect_error([&] { f.read_table("vlen"); }, {p, "vlen", "'key'", "unsupported type"});
}

// Integer datasets read as int32: a value int32 cannot hold is an error naming it, not INT32_MAX.
TEST_F(H5Test, IntegerDatasetOutsideInt32IsRefused) {
  const auto p = path("ints.h5");
  File f(p, "w");
  const std::vector<std::int64_t> v = {1, -2, std::int64_t{3} << 32};
  const hsize_t n = v.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t ds = H5Dcreate2(f.id(), "wide", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Dclose(ds);
  H5Sclose(space);
  expect_error([&] { f.read_int32("wide"); }, {p, "wide", "12884901888"});
  f.write("small", std::vector<std::int32_t>{4, -5, 6, 7}, {2, 2});
  EXPECT_EQ(f.read_int32("small"), (std::vector<std::int32_t>{4, -5, 6, 7}));
}

// HDF5 keeps its error printing per thread (a thread-safe build, as Debian's): a failure in another thread
// (the stop deadline's flush runs in one) must not print HDF5's error stack either.
TEST_F(H5Test, NoHdf5PrintingFromAnotherThread) {
  const auto p = path("thread.h5");
  {
    File f(p, "w");
    f.write_table("t", sample(1));
  }
  ::testing::internal::CaptureStderr();
  std::string what;
  std::thread th([&] {
    try {
      File f(p, "r");
      f.read_table("missing");
    } catch (const ip::Error& e) {
      what = e.what();
    }
  });
  th.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(what.find("missing"), std::string::npos) << what;
  EXPECT_EQ(err, "");
}

// Everything a table holds comes back: numbers exactly (negative, extremes, NaN payload aside), many rows
// across appends with a chunk size that does not divide them, attributes copied between files.
TEST_F(H5Test, RoundTripAcrossAppendsAndCopies) {
  const auto p = path("rt.h5");
  File f(p, "w");
  Table t;
  t.add("i", Kind::kInt64);
  t.add("x", Kind::kFloat64);
  auto& i = t.columns[0];
  auto& x = t.columns[1];
  i.ints = {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), 0};
  x.floats = {-0.0, std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()};
  f.write_table("t", t, 7);
  std::vector<std::int64_t> want = i.ints;
  for (int a = 0; a < 5; ++a) {
    Table more;
    more.add("i", Kind::kInt64);
    more.add("x", Kind::kFloat64);
    auto& mi = more.columns[0];
    auto& mx = more.columns[1];
    for (int r = 0; r < 3 + a; ++r) {
      mi.ints.push_back(100 * a + r);
      mx.floats.push_back(a + r / 8.0);
      want.push_back(100 * a + r);
    }
    ASSERT_TRUE(f.append_table("t", more));
  }
  Table back = f.read_table("t");
  EXPECT_EQ(back.columns[0].ints, want);
  EXPECT_TRUE(std::signbit(back.columns[1].floats[0]));
  EXPECT_EQ(back.columns[1].floats[1], std::numeric_limits<double>::max());
  EXPECT_EQ(back.columns[1].floats[2], std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(back.columns[1].floats.back(), 4 + 6 / 8.0);
  EXPECT_EQ(f.info("t").shape, std::vector<ip::Index64>{static_cast<ip::Index64>(want.size())});

  f.create_group("g");
  f.set_attr("g", "n", std::int64_t{-9});
  f.set_attr("g", "s", std::string("v"));
  f.set_attr("g", "n", std::int64_t{10});  // replaced, keeps no second copy
  File g(path("copy.h5"), "w");
  g.copy_from(f, "g", "h");
  g.copy_attrs_from(f, "g", "/");
  EXPECT_EQ(g.attr_names("/"), (std::vector<std::string>{"s", "n"}));
  EXPECT_EQ(g.attr_int("/", "n"), 10);
  EXPECT_EQ(g.attr_string("h", "s"), "v");
  g.copy_from(f, "t", "t2");
  EXPECT_EQ(g.read_table("t2").columns[0].ints, want);
  expect_error([&] { g.copy_from(f, "t", "t2"); }, {"t2"});
}

// Every HDF5 object a call opens is closed by the time it returns: once the Files are gone, nothing of theirs
// is open in the library (a leaked dataset kept its file open there, and the path could not be created anew).
TEST_F(H5Test, NothingStaysOpenAfterTheFilesClose) {
  const auto p = path("handles.h5");
  {
    File f(p, "w");
    f.write_table("t", sample(3), 4);
    f.write("x", ip::Tensor<float>(std::vector<ip::Index64>{2, 2}));
    f.write("n", std::vector<std::int32_t>{1, 2}, {2});
    f.create_group("g");
    f.set_attr("g", "s", std::string("v"));
    f.set_attr("g", "i", std::int64_t{1});
    f.close();
  }
  {
    File f(p, "a");
    EXPECT_TRUE(f.append_table("t", sample(2)));
    EXPECT_EQ(f.info("t").shape, std::vector<ip::Index64>{5});
    EXPECT_EQ(f.read_table("t").rows(), 5u);
    EXPECT_EQ(f.read_float("x").size(), 4);
    EXPECT_EQ(f.read_int32("n").size(), 2u);
    EXPECT_TRUE(f.is_group("g"));
    EXPECT_EQ(f.list("/").size(), 4u);
    EXPECT_EQ(f.attr_names("g").size(), 2u);
    EXPECT_EQ(f.attr_text("g", "s"), "v");
    EXPECT_EQ(f.attr_int("g", "i"), 1);
    File g(path("copy.h5"), "w");
    g.copy_from(f, "g", "g");
    g.copy_attrs_from(f, "g", "/");
  }
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
  EXPECT_NO_THROW(File(p, "w"));
}

// Integer attributes are int64 in the file: values past int32 come back exactly.
TEST_F(H5Test, IntegerAttributesKeepAllSixtyFourBits) {
  File f(path("i64.h5"), "w");
  for (const std::int64_t v : {std::int64_t{1} << 40, std::numeric_limits<std::int64_t>::min(),
                               std::numeric_limits<std::int64_t>::max()}) {
    f.set_attr("/", "v", v);
    EXPECT_EQ(f.attr_int("/", "v"), v);
  }
}

// copy_attrs_from replaces an attribute the destination has already.
TEST_F(H5Test, CopiedAttributesReplaceExistingOnes) {
  File f(path("src.h5"), "w"), g(path("dst.h5"), "w");
  f.set_attr("/", "n", std::int64_t{2});
  g.set_attr("/", "n", std::string("old"));
  g.copy_attrs_from(f, "/", "/");
  EXPECT_EQ(g.attr_int("/", "n"), 2);
}

// Variable-length string attributes, as h5py writes a str (f.attrs['note'] = 'text'), one or an array of them:
// read (a scalar), shown by attr_text, and copied as they are (a merge copies the root's attributes).
TEST_F(H5Test, VariableLengthStringAttributesAreReadAndCopied) {
  const auto p = path("vlen_attrs.h5");
  File f(p, "w");
  const hid_t vstr = H5Tcopy(H5T_C_S1);
  H5Tset_size(vstr, H5T_VARIABLE);
  H5Tset_cset(vstr, H5T_CSET_UTF8);
  const auto put = [&](const char* name, std::vector<const char*> values, bool scalar) {
    const hsize_t n = values.size();
    const hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
    const hid_t a = H5Acreate2(f.id(), name, vstr, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(a, 0);
    ASSERT_GE(H5Awrite(a, vstr, values.data()), 0);
    H5Aclose(a);
    H5Sclose(space);
  };
  put("note", {"edited by hand \xc3\xa9"}, true);
  put("empty", {""}, true);
  put("list", {"a", "bc", "def"}, false);
  H5Tclose(vstr);
  EXPECT_EQ(f.attr_string("/", "note"), "edited by hand \xc3\xa9");
  EXPECT_EQ(f.attr_text("/", "note"), "edited by hand \xc3\xa9");
  EXPECT_EQ(f.attr_string("/", "empty"), "");
  expect_error([&] { f.attr_string("/", "list"); }, {p, "'list'", "holds 3 strings, not one"});
  EXPECT_EQ(f.attr_text("/", "list"), "(3 values)");
  File g(path("vlen_copy.h5"), "w");
  g.set_attr("/", "note", std::string("replaced"));
  g.copy_attrs_from(f, "/", "/");
  EXPECT_EQ(g.attr_string("/", "note"), "edited by hand \xc3\xa9");
  EXPECT_EQ(g.attr_string("/", "empty"), "");
  g.close();
  // The array came over whole, still variable-length (read it back with the HDF5 API).
  File back(path("vlen_copy.h5"), "r");
  const hid_t a = H5Aopen(back.id(), "list", H5P_DEFAULT);
  ASSERT_GE(a, 0);
  const hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  EXPECT_GT(H5Tis_variable_str(type), 0);
  ASSERT_EQ(H5Sget_simple_extent_npoints(space), 3);
  std::vector<char*> got(3, nullptr);
  ASSERT_GE(H5Aread(a, type, got.data()), 0);
  EXPECT_STREQ(got[0], "a");
  EXPECT_STREQ(got[1], "bc");
  EXPECT_STREQ(got[2], "def");
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, got.data());
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(a);
}

// int32's own extremes, stored wider, read exactly; one past them is refused.
TEST_F(H5Test, Int32ExtremesStoredWiderRead) {
  const auto p = path("ext.h5");
  File f(p, "w");
  const auto put = [&](const std::string& name, std::vector<std::int64_t> v) {
    const hsize_t n = v.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(f.id(), name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    H5Dclose(ds);
    H5Sclose(space);
  };
  constexpr std::int64_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  put("edges", {lo, hi, 0});
  put("below", {lo - 1});
  put("above", {hi + 1});
  EXPECT_EQ(f.read_int32("edges"),
            (std::vector<std::int32_t>{static_cast<std::int32_t>(lo), static_cast<std::int32_t>(hi), 0}));
  expect_error([&] { f.read_int32("below"); }, {p, "below", "-2147483649"});
  expect_error([&] { f.read_int32("above"); }, {p, "above", "2147483648"});
}

// Opening a file in a thread of its own: HDF5's refusal is our message only.
TEST_F(H5Test, NoHdf5PrintingWhenAnotherThreadOpens) {
  const auto p = path("cut.h5");
  {
    File f(p, "w");
    f.write_table("t", sample(100), 8);
  }
  fs::resize_file(p, fs::file_size(p) / 2);
  ::testing::internal::CaptureStderr();
  std::string what;
  std::thread th([&] {
    try {
      File f(p, "r");
    } catch (const ip::Error& e) {
      what = e.what();
    }
  });
  th.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(what.find(p), std::string::npos) << what;
  EXPECT_EQ(err, "");
}

// A chunk of one row is a chunk: the table grows. Strings are stored NULL-padded (numpy's 'S', and what lets
// a string fill its whole width): a reader converting to a NULL-padded type of the same width gets every byte.
TEST_F(H5Test, OneRowChunksAndNullPaddedStrings) {
  File f(path("one.h5"), "w");
  Table t = sample(1);
  t.columns[0].strings = {std::string(8, 'k')};
  f.write_table("t", t, 1);
  EXPECT_TRUE(f.append_table("t", sample(2)));
  EXPECT_EQ(f.read_table("t").rows(), 3u);
  const hid_t ds = H5Dopen2(f.id(), "t", H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  const hid_t s8 = H5Tcopy(H5T_C_S1);
  H5Tset_size(s8, 8);
  H5Tset_strpad(s8, H5T_STR_NULLPAD);
  H5Tset_cset(s8, H5T_CSET_UTF8);
  const hid_t mtype = H5Tcreate(H5T_COMPOUND, 8);
  H5Tinsert(mtype, "key", 0, s8);
  char keys[3 * 8] = {};
  EXPECT_GE(H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, keys), 0);
  EXPECT_EQ(std::string(keys, 8), std::string(8, 'k'));
  H5Tclose(mtype);
  H5Tclose(s8);
  H5Dclose(ds);
}

// Chunked tables of another writer with the members this writer uses: one that cannot grow (maxshape =
// shape, as h5py makes a compressed dataset) is not appended to (false); a rank-2 compound is no table.
TEST_F(H5Test, FixedShapeChunkedTableAndRankTwoCompound) {
  const auto p = path("fixed.h5");
  File f(p, "w");
  const hid_t type = H5Tcreate(H5T_COMPOUND, 16);
  H5Tinsert(type, "index", 0, H5T_STD_I64LE);
  H5Tinsert(type, "value", 8, H5T_IEEE_F64LE);
  const hsize_t dims[2] = {2, 3}, chunk[2] = {2, 3};
  const hid_t space1 = H5Screate_simple(1, dims, nullptr), space2 = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  const hid_t ds1 = H5Dcreate2(f.id(), "fixed", type, space1, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  const hid_t ds2 = H5Dcreate2(f.id(), "rank2", type, space2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds1, 0);
  ASSERT_GE(ds2, 0);
  for (hid_t h : {ds1, ds2}) H5Dclose(h);
  for (hid_t h : {space1, space2}) H5Sclose(h);
  H5Pclose(dcpl);
  H5Tclose(type);
  Table row;
  row.add("index", Kind::kInt64).ints = {1};
  row.add("value", Kind::kFloat64).floats = {0.5};
  EXPECT_FALSE(append_answer(f, "fixed", row));
  EXPECT_EQ(f.read_table("fixed").rows(), 2u);
  expect_error([&] { f.read_table("rank2"); }, {p, "rank2", "rank 1"});
}

// A filter that fails every chunk it is given (registered here: a write that fails after the table has grown,
// as a full disk would): the append throws and the table keeps its rows, with no row of fill values added.
size_t failing_filter(unsigned, size_t, const unsigned[], size_t, size_t*, void**) { return 0; }

TEST_F(H5Test, FailedAppendLeavesTheTableAsItWas) {
  const H5Z_class2_t cls = {H5Z_CLASS_T_VERS, static_cast<H5Z_filter_t>(300), 1, 1, "ip_h5_test_fails", nullptr,
                            nullptr, failing_filter};
  ASSERT_GE(H5Zregister(&cls), 0);
  const auto p = path("fails.h5");
  File f(p, "w");
  const hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = 100000;  // 800 kB: more than a chunk cache's share
  const hid_t type = H5Tcreate(H5T_COMPOUND, 8);
  H5Tinsert(type, "index", 0, H5T_STD_I64LE);
  const hid_t space = H5Screate_simple(1, &zero, &unlimited);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  H5Pset_filter(dcpl, 300, H5Z_FLAG_MANDATORY, 0, nullptr);
  const hid_t ds = H5Dcreate2(f.id(), "t", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(type);
  Table rows;
  rows.add("index", Kind::kInt64).ints.assign(200000, 7);  // two chunks, one complete: written through the filter
  expect_error([&] { f.append_table("t", rows); }, {p, "t", "append failed"});
  EXPECT_EQ(f.info("t").shape, std::vector<ip::Index64>{0});
}

// A chunked, extendible table of one string member named "key" of `width` bytes, padded `pad`, in character
// set `cset`, holding `rows` (each at most `width` bytes), as h5py or a C writer makes one.
void raw_string_table(File& f, const std::string& name, std::size_t width, H5T_str_t pad, H5T_cset_t cset,
                      const std::vector<std::string>& rows) {
  const hid_t s = H5Tcopy(H5T_C_S1);
  H5Tset_size(s, width);
  H5Tset_strpad(s, pad);
  H5Tset_cset(s, cset);
  const hid_t type = H5Tcreate(H5T_COMPOUND, width);
  H5Tinsert(type, "key", 0, s);
  const hsize_t n = rows.size(), chunk = 4, unlimited = H5S_UNLIMITED;
  const hid_t space = H5Screate_simple(1, &n, &unlimited);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  const hid_t ds = H5Dcreate2(f.id(), name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  std::vector<char> buf(width * rows.size(), 0);
  for (std::size_t r = 0; r < rows.size(); ++r) std::memcpy(buf.data() + r * width, rows[r].data(), rows[r].size());
  if (n > 0) {
    EXPECT_GE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(type);
  H5Tclose(s);
}

// A NULL-terminated string member (h5py's and C's fixed strings): appending a string that fills its width
// would lose the last byte to HDF5's conversion, so such a member is not appended to (false: the caller
// rewrites the table in its own types). Reading it gives every byte before the terminator.
TEST_F(H5Test, NullTerminatedStringMemberIsNotAppendedTo) {
  File f(path("nullterm.h5"), "w");
  raw_string_table(f, "t", 8, H5T_STR_NULLTERM, H5T_CSET_UTF8, {"abc", "1234567"});
  Table full;
  full.add("key", Kind::kString).strings = {"abcdefgh"};
  EXPECT_FALSE(append_answer(f, "t", full));
  EXPECT_EQ(f.info("t").shape, std::vector<ip::Index64>{2});
  EXPECT_EQ(f.read_table("t").columns[0].strings, (std::vector<std::string>{"abc", "1234567"}));
  // The rewrite the caller then makes keeps every byte.
  Table all = f.read_table("t");
  all.columns[0].strings.push_back("abcdefgh");
  f.remove("t");
  f.write_table("t", all);
  EXPECT_EQ(f.read_table("t").columns[0].strings, (std::vector<std::string>{"abc", "1234567", "abcdefgh"}));
}

// A NULL-padded member in ASCII (numpy's 'S' as h5py stores it): read as it is (HDF5 has no conversion between
// ASCII and UTF-8, and the read failed), not appended to (false: the append failed with an error).
TEST_F(H5Test, NullPaddedAsciiStringMemberIsReadNotAppendedTo) {
  File f(path("ascii.h5"), "w");
  raw_string_table(f, "t", 8, H5T_STR_NULLPAD, H5T_CSET_ASCII, {"abc", "12345678"});
  EXPECT_EQ(f.read_table("t").columns[0].strings, (std::vector<std::string>{"abc", "12345678"}));
  Table full;
  full.add("key", Kind::kString).strings = {"abcdefgh"};
  EXPECT_FALSE(append_answer(f, "t", full));
  EXPECT_EQ(f.info("t").shape, std::vector<ip::Index64>{2});
}

// An unsigned 64-bit member of another writer: values up to INT64_MAX read exactly; a larger one is an error
// naming the column, the row and the value, not INT64_MAX (HDF5's conversion clamps without an error).
TEST_F(H5Test, Uint64MemberAboveInt64IsRefused) {
  const auto p = path("u64.h5");
  File f(p, "w");
  const hid_t type = H5Tcreate(H5T_COMPOUND, 16);
  H5Tinsert(type, "n", 0, H5T_STD_U64LE);
  H5Tinsert(type, "x", 8, H5T_IEEE_F64LE);
  struct Row {
    std::uint64_t n;
    double x;
  };
  const hsize_t two = 2;
  const std::uint64_t big = std::uint64_t{1} << 63;
  for (const auto& [name, last] : {std::pair<const char*, std::uint64_t>{"fits", big - 1}, {"over", big}}) {
    const Row rows[2] = {{5, 0.5}, {last, 1.5}};
    const hid_t space = H5Screate_simple(1, &two, nullptr);
    const hid_t ds = H5Dcreate2(f.id(), name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    const hid_t mtype = H5Tcreate(H5T_COMPOUND, sizeof(Row));
    H5Tinsert(mtype, "n", HOFFSET(Row, n), H5T_NATIVE_UINT64);
    H5Tinsert(mtype, "x", HOFFSET(Row, x), H5T_NATIVE_DOUBLE);
    EXPECT_GE(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
    H5Tclose(mtype);
    H5Dclose(ds);
    H5Sclose(space);
  }
  H5Tclose(type);
  const Table fits = f.read_table("fits");
  EXPECT_EQ(fits.columns[0].ints, (std::vector<std::int64_t>{5, std::numeric_limits<std::int64_t>::max()}));
  EXPECT_EQ(fits.columns[1].floats, (std::vector<double>{0.5, 1.5}));
  expect_error([&] { f.read_table("over"); }, {p, "over", "'n'", "row 1", "9223372036854775808", "int64"});
}

// No object has an empty name; the root group exists.
TEST_F(H5Test, EmptyNameIsNoObject) {
  File f(path("names.h5"), "w");
  EXPECT_FALSE(f.exists(""));
  EXPECT_TRUE(f.exists("/"));
}

}  // namespace
