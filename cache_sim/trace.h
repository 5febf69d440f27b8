// Traces of accesses: in memory, and in three file formats.
//
//  txt     one access a line: "id [size [score]]", whitespace separated; '#' starts a comment; blank
//          lines are skipped. Missing size: 1 byte; missing score: 1.
//  csv     a header line naming the columns, in any order: id (required), size, score, request, step;
//          then one access a line, comma separated. '#' lines are skipped.
//  oracle  libCacheSim's oracleGeneral binary: packed little-endian 24-byte records: u32 time,
//          u64 id, u32 size, i64 index of the next access to the same id (-1: none).
// A bad line or record is an error naming the file and the line (or the record index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ip::cache {

struct Access {
  std::uint64_t id = 0;
  std::uint32_t size = 1;      // bytes (0: takes no room in a byte-capacity level)
  float score = 1.0f;          // relevance (attention mass), finite and >= 0
  std::uint32_t request = 0;   // request id
  std::uint32_t step = 0;      // decode step id
};

enum class TraceFormat { txt, csv, oracle };

// "txt", "csv", "oracle" (error naming the text otherwise).
TraceFormat parse_trace_format(std::string_view text);
// From the file name: *.csv -> csv; *.bin, *.oracleGeneral* -> oracle; anything else -> txt.
TraceFormat guess_trace_format(const std::string& path);
const char* trace_format_name(TraceFormat f);

struct Trace {
  std::vector<Access> accesses;
  bool has_request = false;  // the source named request / step columns
  bool has_step = false;
  std::string source;        // file it came from, for messages
};

Trace read_trace(const std::string& path, TraceFormat format);

// Throws ip::Error ("trace 'PATH': no such file", "...: a directory, not a trace file", "...: not a
// regular file or a FIFO") unless `path` can be opened as a trace. Every reader below checks it first.
void require_trace_file(const std::string& path);

// Reads a trace without keeping it whole: `sink(accesses, n)` receives it in order, in chunks of at
// most `chunk` accesses (the last may be shorter), with the checks and messages of read_trace. For
// traces too long for memory (`indexpool cache-sim --stream`). The returned Trace holds no accesses,
// only the header facts (has_request, has_step) and the source.
using AccessSink = std::function<void(const Access* accesses, std::size_t n)>;
Trace stream_trace(const std::string& path, TraceFormat format, const AccessSink& sink,
                   std::size_t chunk = std::size_t{1} << 20);
void write_trace(const std::string& path, TraceFormat format, const Trace& trace);

// For each access, the index of the next access to the same id (-1: none). O(n).
std::vector<std::int64_t> next_uses(const std::vector<Access>& accesses);

namespace detail {
// `block`: bytes read at a time (tests use tiny blocks to cut lines at every place).
Trace stream_text_trace(const std::string& path, bool csv, const AccessSink& sink, std::size_t chunk,
                        std::size_t block = std::size_t{8} << 20);
void write_text_trace(const std::string& path, bool csv, const Trace& trace);
Trace stream_oracle_trace(const std::string& path, const AccessSink& sink, std::size_t chunk);
void write_oracle_trace(const std::string& path, const Trace& trace);
}  // namespace detail

}  // namespace ip::cache
