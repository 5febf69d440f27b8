#include "experiments/import.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "experiments/h5.h"

namespace ip::exp {
namespace {

Tensor<float> read_checked(const h5::File& f, const std::string& name, std::size_t rank) {
  const h5::DatasetInfo di = f.info(name);
  IP_REQUIRE(di.is_float, "{}: dataset '{}' must be floating point (float32; float16 and float64 are read as float32), "
             "it is {}", f.path(), name, di.type_name);
  IP_REQUIRE(di.shape.size() == rank, "{}: dataset '{}' must have rank {}, has rank {}", f.path(), name, rank,
             di.shape.size());
  return f.read_float(name);
}

constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
// One word into a lane: four independent lanes keep the multiplies in flight (several GB/s a core).
std::uint64_t mix_in(std::uint64_t lane, std::uint64_t word) { return rotl(lane ^ (word * kPrime2), 31) * kPrime1; }

}  // namespace

FileDigest file_digest(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  IP_REQUIRE(f != nullptr, "cannot read '{}': {}", path, std::strerror(errno));
  constexpr std::size_t kChunk = std::size_t{1} << 20;  // a multiple of the 32-byte block
  std::vector<unsigned char> buf(kChunk);
  std::uint64_t lane[4] = {kPrime1, kPrime2, ~kPrime1, ~kPrime2};
  FileDigest d;
  std::size_t got = 0;
  do {
    got = std::fread(buf.data(), 1, kChunk, f.get());  // short only at the end of the file (or on an error)
    IP_REQUIRE(got == kChunk || !std::ferror(f.get()), "cannot read '{}': {}", path, std::strerror(errno));
    d.bytes += got;
    std::size_t i = 0;
    for (; i + 32 <= got; i += 32)
      for (int j = 0; j < 4; ++j) {
        std::uint64_t w;
        std::memcpy(&w, buf.data() + i + 8 * j, 8);
        lane[j] = mix_in(lane[j], w);
      }
    for (; i < got; ++i) lane[0] = mix_in(lane[0], buf[i]);  // the file's last bytes, one at a time
  } while (got == kChunk);
  std::uint64_t h = d.bytes;
  for (const std::uint64_t l : lane) h = splitmix64(h ^ l);
  d.hash = h;
  return d;
}

Workload import_workload(const std::string& path) {
  const h5::File f(path, "r");
  Workload w;
  for (const char* name : {"index_keys", "index_queries", "head_weights"})
    IP_REQUIRE(f.exists(name), "{}: missing dataset '{}' (needs index_keys, index_queries, head_weights)", path, name);
  w.index_keys = read_checked(f, "index_keys", 2);
  w.index_queries = read_checked(f, "index_queries", 3);
  w.head_weights = read_checked(f, "head_weights", 2);
  const int present = f.exists("attn_keys") + f.exists("attn_queries") + f.exists("values");
  IP_REQUIRE(present == 0 || present == 3, "{}: attn_keys, attn_queries and values must come together ({} of 3 present)",
             path, present);
  if (present == 3) {
    w.attn_keys = read_checked(f, "attn_keys", 2);
    w.values = read_checked(f, "values", 2);
    const h5::DatasetInfo qi = f.info("attn_queries");
    IP_REQUIRE(qi.is_float, "{}: dataset 'attn_queries' must be floating point (float32; float16 and float64 are read "
               "as float32), it is {}", path, qi.type_name);
    IP_REQUIRE(qi.shape.size() == 2 || qi.shape.size() == 3, "{}: dataset 'attn_queries' must have rank 2 or 3", path);
    w.attn_queries = f.read_float("attn_queries");
    if (qi.shape.size() == 2) w.attn_queries.reshape({qi.shape[0], 1, qi.shape[1]});
  }
  validate_workload(w, path);
  return w;
}

}  // namespace ip::exp
