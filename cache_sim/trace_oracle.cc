// libCacheSim's oracleGeneral binary traces: packed little-endian 24-byte records
// (u32 time, u64 id, u32 size, i64 next access index, -1: none).
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "cache_sim/trace.h"

namespace ip::cache::detail {

namespace {

static_assert(std::endian::native == std::endian::little, "oracleGeneral I/O assumes a little-endian host");
constexpr std::size_t kRecord = 24;

}  // namespace

Trace stream_oracle_trace(const std::string& path, const AccessSink& sink, std::size_t chunk) {
  std::ifstream in(path, std::ios::binary);
  IP_REQUIRE(in.good(), "trace '{}': cannot open: {}", path, std::strerror(errno));
  std::vector<char> data(chunk * kRecord);
  std::vector<Access> out(chunk);
  std::size_t i = 0;  // index of the next record
  for (;;) {
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    IP_REQUIRE(!in.bad(), "trace '{}': read error", path);
    const auto got = static_cast<std::size_t>(in.gcount());
    const std::size_t n = got / kRecord;
    IP_REQUIRE(got % kRecord == 0, "trace '{}': record {} is truncated ({} bytes; oracleGeneral records are 24 bytes)",
               path, i + n, got % kRecord);
    for (std::size_t k = 0; k < n; ++k, ++i) {
      const char* r = data.data() + k * kRecord;
      std::uint64_t id;
      std::uint32_t size;
      std::int64_t next;
      std::memcpy(&id, r + 4, 8);
      std::memcpy(&size, r + 12, 4);
      std::memcpy(&next, r + 16, 8);
      IP_REQUIRE(next == -1 || next > static_cast<std::int64_t>(i),
                 "trace '{}': record {}: next access index {} is neither -1 nor later than the record", path, i, next);
      out[k] = Access{};
      out[k].id = id;
      out[k].size = size;
    }
    if (n) sink(out.data(), n);
    if (got < data.size()) break;  // end of file
  }
  return Trace{};
}

void write_oracle_trace(const std::string& path, const Trace& trace) {
  const auto next = next_uses(trace.accesses);
  std::vector<char> data(trace.accesses.size() * kRecord);
  for (std::size_t i = 0; i < trace.accesses.size(); ++i) {
    char* r = data.data() + i * kRecord;
    const auto time = static_cast<std::uint32_t>(i);
    std::memcpy(r, &time, 4);
    std::memcpy(r + 4, &trace.accesses[i].id, 8);
    std::memcpy(r + 12, &trace.accesses[i].size, 4);
    std::memcpy(r + 16, &next[i], 8);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  IP_REQUIRE(out.good(), "trace '{}': cannot create", path);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  IP_REQUIRE(!out.fail(), "trace '{}': write failed", path);
}

}  // namespace ip::cache::detail
