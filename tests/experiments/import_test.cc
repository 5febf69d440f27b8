// HDF5 wrapper round trip and workload import, including every malformed-file case.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <gtest/gtest.h>

#include "core/error.h"
#include "experiments/h5.h"
#include "experiments/import.h"

namespace {

namespace fs = std::filesystem;

ip::Tensor<float> iota(std::vector<ip::Index64> shape, float start = 0.0f) {
  ip::Tensor<float> t(shape);
  for (ip::Index64 i = 0; i < t.size(); ++i) t.data()[i] = start + static_cast<float>(i);
  return t;
}

// A dataset of another float width (e.g. numpy's default float64), written with HDF5's C API.
void write_float(ip::h5::File& f, const std::string& name, const std::vector<double>& v,
                 const std::vector<hsize_t>& shape, hid_t file_type) {
  const hid_t space = H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr);
  const hid_t ds = H5Dcreate2(f.id(), name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Dclose(ds);
  H5Sclose(space);
}

// IEEE half precision as h5py writes numpy's float16 (HDF5 1.10 has no predefined half type).
hid_t half_type() {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_offset(t, 0);
  H5Tset_precision(t, 16);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

class ImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_import_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  // A valid file: T = 6, D = 4, Q = 2, H = 3, optional attention with Da = 4, Ha = 2, Dv = 5.
  std::string make(const std::string& name, bool attention, std::function<void(ip::h5::File&)> extra = {}) {
    const std::string p = path(name);
    ip::h5::File f(p, "w");
    if (!extra) {
      f.write("index_keys", iota({6, 4}));
      f.write("index_queries", iota({2, 3, 4}, 1.0f));
      f.write("head_weights", iota({2, 3}));
      if (attention) {
        f.write("attn_keys", iota({6, 4}));
        f.write("attn_queries", iota({2, 2, 4}));
        f.write("values", iota({6, 5}));
      }
    } else {
      extra(f);
    }
    return p;
  }
  std::string error_of(const std::string& p) {
    try {
      ip::exp::import_workload(p);
    } catch (const ip::Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST_F(ImportTest, AttributesRoundTrip) {
  const std::string p = path("attrs.h5");
  {
    ip::h5::File f(p, "w");
    f.create_group("point_0");
    f.set_attr("/", "tool", std::string("indexpool"));
    f.set_attr("/", "schema_version", std::int64_t{3});
    f.write("point_0/selected_groups", std::vector<std::int32_t>{4, 1, 7, 2}, {2, 2});
  }
  ip::h5::File f(p, "r");
  EXPECT_EQ(f.attr_string("/", "tool"), "indexpool");
  EXPECT_EQ(f.attr_int("/", "schema_version"), 3);
  const auto info = f.info("point_0/selected_groups");
  EXPECT_TRUE(info.is_integer);
  EXPECT_EQ(info.shape, (std::vector<ip::Index64>{2, 2}));
  EXPECT_FALSE(f.exists("point_1/selected_groups"));
}

TEST_F(ImportTest, ValidFileImportsExactly) {
  const auto w = ip::exp::import_workload(make("ok.h5", true));
  ASSERT_EQ(w.tokens(), 6);
  ASSERT_EQ(w.dim(), 4);
  EXPECT_EQ(w.steps(), 2);
  EXPECT_EQ(w.index_heads(), 3);
  EXPECT_EQ(w.index_keys.data()[5], 5.0f);
  EXPECT_EQ(w.index_queries.data()[0], 1.0f);
  EXPECT_TRUE(w.has_attention());
  EXPECT_EQ(w.values.dim(1), 5);
}

TEST_F(ImportTest, AttentionArraysAreOptionalAndRank2QueriesAreOneHead) {
  EXPECT_FALSE(ip::exp::import_workload(make("noattn.h5", false)).has_attention());
  const auto p = make("rank2.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", iota({6, 4}));
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3}));
    f.write("attn_keys", iota({6, 4}));
    f.write("attn_queries", iota({2, 4}));
    f.write("values", iota({6, 5}));
  });
  const auto w = ip::exp::import_workload(p);
  EXPECT_EQ(w.attn_queries.shape(), (std::vector<ip::Index64>{2, 1, 4}));
}

// float64 and float16 arrays are read as float32 (the same values when float32 holds them); a finite float64
// value that float32 cannot hold is named as such, not as the infinity a conversion would make of it.
TEST_F(ImportTest, OtherFloatWidthsAreReadAsFloat32AndOutOfRangeValuesNamed) {
  std::vector<double> keys(24);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<double>(i);
  const hid_t half = half_type();
  for (const hid_t type : {H5T_IEEE_F64LE, half}) {
    const auto p = make(type == half ? "f16.h5" : "f64.h5", false, [&](ip::h5::File& f) {
      write_float(f, "index_keys", keys, {6, 4}, type);
      f.write("index_queries", iota({2, 3, 4}, 1.0f));
      f.write("head_weights", iota({2, 3}));
    });
    const auto w = ip::exp::import_workload(p);
    ASSERT_EQ(w.tokens(), 6);
    for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(w.index_keys.data()[i], static_cast<float>(keys[i])) << i;
    EXPECT_EQ(ip::h5::File(p, "r").info("index_keys").element_size, type == half ? 2u : 8u);
  }
  H5Tclose(half);
  keys[9] = -1e300;
  const auto big = make("f64big.h5", false, [&](ip::h5::File& f) {
    write_float(f, "index_keys", keys, {6, 4}, H5T_IEEE_F64LE);
    f.write("index_queries", iota({2, 3, 4}, 1.0f));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(big).find(big + ":index_keys: value -1e+300 (flat element 9) is outside float32's range"),
            std::string::npos)
      << error_of(big);
  keys[9] = std::nan("");  // a NaN stays a NaN, reported as one
  const auto nan = make("f64nan.h5", false, [&](ip::h5::File& f) {
    write_float(f, "index_keys", keys, {6, 4}, H5T_IEEE_F64LE);
    f.write("index_queries", iota({2, 3, 4}, 1.0f));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(nan).find("NaN"), std::string::npos) << error_of(nan);
}

TEST_F(ImportTest, MalformedFilesNameFileAndDataset) {
  EXPECT_NE(error_of(path("missing.h5")).find("does not exist"), std::string::npos);
  {
    std::ofstream(path("text.h5")) << "not hdf5";
  }
  EXPECT_NE(error_of(path("text.h5")).find("not a readable HDF5 file"), std::string::npos);

  auto missing = make("nokeys.h5", false, [](ip::h5::File& f) { f.write("index_queries", iota({2, 3, 4})); });
  EXPECT_NE(error_of(missing).find(missing + ": missing dataset 'index_keys'"), std::string::npos) << error_of(missing);

  auto rank = make("rank.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", iota({24}));
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(rank).find("'index_keys' must have rank 2"), std::string::npos) << error_of(rank);

  auto dtype = make("dtype.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", std::vector<std::int32_t>(24, 1), {6, 4});
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(dtype).find("'index_keys' must be floating point (float32; float16 and float64 are read as "
                                 "float32), it is int32"),
            std::string::npos)
      << error_of(dtype);

  auto dim = make("dim.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", iota({6, 4}));
    f.write("index_queries", iota({2, 3, 5}));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(dim).find("D = 5"), std::string::npos) << error_of(dim);

  auto nan = make("nan.h5", false, [](ip::h5::File& f) {
    auto k = iota({6, 4});
    k.data()[9] = std::nanf("");
    f.write("index_keys", k);
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3}));
  });
  EXPECT_NE(error_of(nan).find("index_keys contains NaN"), std::string::npos) << error_of(nan);
  EXPECT_NE(error_of(nan).find(nan), std::string::npos);

  auto partial = make("partial.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", iota({6, 4}));
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3}));
    f.write("values", iota({6, 5}));
  });
  EXPECT_NE(error_of(partial).find("must come together"), std::string::npos) << error_of(partial);
}

// The digest that makes an imported file part of a sweep's id: equal bytes give equal digests, a byte changed
// anywhere (the first, one past the first 1 MiB read, the last of a tail shorter than a block) or a byte more
// gives another, and an unreadable file is an error naming it.
TEST_F(ImportTest, FileDigestFollowsEveryByte) {
  std::string bytes(std::size_t{3} << 20 | 13, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  auto write = [&](const std::string& name, const std::string& b) {
    std::ofstream(path(name), std::ios::binary) << b;
    return path(name);
  };
  const ip::exp::FileDigest d = ip::exp::file_digest(write("a", bytes));
  EXPECT_EQ(d.bytes, bytes.size());
  const ip::exp::FileDigest same = ip::exp::file_digest(write("b", bytes));
  EXPECT_EQ(same.hash, d.hash);
  for (const std::size_t at : {std::size_t{0}, (std::size_t{1} << 20) + 5, bytes.size() - 1}) {
    std::string c = bytes;
    c[at] = static_cast<char>(c[at] ^ 1);
    EXPECT_NE(ip::exp::file_digest(write("c", c)).hash, d.hash) << "byte " << at;
  }
  EXPECT_NE(ip::exp::file_digest(write("d", bytes + '\0')).hash, d.hash);
  EXPECT_NE(ip::exp::file_digest(write("e", "")).hash, d.hash);
  try {
    ip::exp::file_digest(path("absent.h5"));
    ADD_FAILURE() << "no error for a missing file";
  } catch (const ip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.h5"), std::string::npos) << e.what();
  }
}

// The optional attention arrays are checked like the required ones: floating point, and each of its rank
// (attention queries: [Q, Ha, Da] or [Q, Da]); the required head_weights too.
TEST_F(ImportTest, EveryArrayIsCheckedForTypeAndRank) {
  const auto with = [&](const std::string& name, std::function<void(ip::h5::File&)> bad) {
    return make(name, false, [&](ip::h5::File& f) {
      f.write("index_keys", iota({6, 4}));
      f.write("index_queries", iota({2, 3, 4}));
      f.write("head_weights", iota({2, 3}));
      bad(f);
    });
  };
  const auto attention = [](ip::h5::File& f, const char* skip) {
    if (std::string(skip) != "attn_keys") f.write("attn_keys", iota({6, 4}));
    if (std::string(skip) != "attn_queries") f.write("attn_queries", iota({2, 2, 4}));
    if (std::string(skip) != "values") f.write("values", iota({6, 5}));
  };
  const auto int_q = with("int_q.h5", [&](ip::h5::File& f) {
    attention(f, "attn_queries");
    f.write("attn_queries", std::vector<std::int32_t>(16, 1), {2, 2, 4});
  });
  EXPECT_NE(error_of(int_q).find(int_q + ": dataset 'attn_queries' must be floating point (float32; float16 and "
                                         "float64 are read as float32), it is int32"),
            std::string::npos)
      << error_of(int_q);
  const auto rank4_q = with("rank4_q.h5", [&](ip::h5::File& f) {
    attention(f, "attn_queries");
    write_float(f, "attn_queries", std::vector<double>(16, 1.0), {2, 2, 1, 4}, H5T_IEEE_F32LE);
  });
  EXPECT_NE(error_of(rank4_q).find(rank4_q + ": dataset 'attn_queries' must have rank 2 or 3"), std::string::npos)
      << error_of(rank4_q);
  const auto values3 = with("values3.h5", [&](ip::h5::File& f) {
    attention(f, "values");
    f.write("values", iota({6, 5, 1}));
  });
  EXPECT_NE(error_of(values3).find(values3 + ": dataset 'values' must have rank 2, has rank 3"), std::string::npos)
      << error_of(values3);
  const auto keys1 = with("keys1.h5", [&](ip::h5::File& f) {
    attention(f, "attn_keys");
    f.write("attn_keys", iota({24}));
  });
  EXPECT_NE(error_of(keys1).find(keys1 + ": dataset 'attn_keys' must have rank 2, has rank 1"), std::string::npos)
      << error_of(keys1);
  const auto int_v = with("int_v.h5", [&](ip::h5::File& f) {
    attention(f, "values");
    f.write("values", std::vector<std::int32_t>(30, 1), {6, 5});
  });
  EXPECT_NE(error_of(int_v).find("dataset 'values' must be floating point"), std::string::npos) << error_of(int_v);
  const auto hw3 = make("hw3.h5", false, [](ip::h5::File& f) {
    f.write("index_keys", iota({6, 4}));
    f.write("index_queries", iota({2, 3, 4}));
    f.write("head_weights", iota({2, 3, 1}));
  });
  EXPECT_NE(error_of(hw3).find(hw3 + ": dataset 'head_weights' must have rank 2, has rank 3"), std::string::npos)
      << error_of(hw3);
}

// The digest is part of an imported workload's sweep id, which results files store: it must not change
// between builds or machines, or every such file stops resuming and merging. Values from an independent
// transcription of the algorithm (tests: Python, 64-bit little-endian words, four lanes, the tail byte by
// byte, then the size and the lanes through splitmix64).
TEST_F(ImportTest, FileDigestIsStable) {
  std::string bytes(77, '\0');  // two 32-byte blocks and a 13-byte tail
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  std::ofstream(path("g"), std::ios::binary) << bytes;
  std::ofstream(path("empty"), std::ios::binary) << "";
  EXPECT_EQ(ip::exp::file_digest(path("g")).hash, 0x3e913e56c5dffe9dull);
  EXPECT_EQ(ip::exp::file_digest(path("empty")).hash, 0x49b259d3735432a1ull);
  EXPECT_EQ(ip::exp::file_digest(path("empty")).bytes, 0u);
}

TEST_F(ImportTest, ExclusiveCreateRefusesAnExistingFile) {
  const auto p = make("exists.h5", false);
  EXPECT_THROW(ip::h5::File(p, "x"), ip::Error);
  EXPECT_NO_THROW(ip::exp::import_workload(p));  // untouched
}

}  // namespace
