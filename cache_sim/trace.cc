#include "cache_sim/trace.h"

#include <filesystem>

#include "core/error.h"
#include "cache_sim/detail/flat_map.h"

namespace ip::cache {

TraceFormat parse_trace_format(std::string_view text) {
  if (text == "txt") return TraceFormat::txt;
  if (text == "csv") return TraceFormat::csv;
  if (text == "oracle") return TraceFormat::oracle;
  throw Error(fmt::format("--format '{}': expected txt, csv or oracle", std::string(text)));
}

TraceFormat guess_trace_format(const std::string& path) {
  const auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".csv")) return TraceFormat::csv;
  if (ends(".bin") || path.find(".oracleGeneral") != std::string::npos) return TraceFormat::oracle;
  return TraceFormat::txt;
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::txt: return "txt";
    case TraceFormat::csv: return "csv";
    case TraceFormat::oracle: return "oracle";
  }
  return "?";
}

void require_trace_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  IP_REQUIRE(st.type() != fs::file_type::not_found, "trace '{}': no such file", path);
  IP_REQUIRE(!ec, "trace '{}': cannot open: {}", path, ec.message());
  IP_REQUIRE(!fs::is_directory(st), "trace '{}': a directory, not a trace file", path);
  // Character devices too: /dev/stdin of a pipe reads as a FIFO, of a terminal as a device.
  IP_REQUIRE(fs::is_regular_file(st) || fs::is_fifo(st) || fs::is_character_file(st),
             "trace '{}': not a regular file or a FIFO", path);
}

Trace stream_trace(const std::string& path, TraceFormat format, const AccessSink& sink, std::size_t chunk) {
  IP_REQUIRE(chunk > 0, "stream_trace: chunks of 0 accesses");
  require_trace_file(path);
  Trace t = format == TraceFormat::oracle ? detail::stream_oracle_trace(path, sink, chunk)
                                          : detail::stream_text_trace(path, format == TraceFormat::csv, sink, chunk);
  t.source = path;
  return t;
}

Trace read_trace(const std::string& path, TraceFormat format) {
  std::vector<Access> all;
  if (format == TraceFormat::oracle) {  // 24-byte records: reserve once instead of doubling
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    if (!ec) all.reserve(static_cast<std::size_t>(bytes / 24));
  }
  Trace t = stream_trace(path, format, [&](const Access* a, std::size_t n) { all.insert(all.end(), a, a + n); });
  t.accesses = std::move(all);
  return t;
}

void write_trace(const std::string& path, TraceFormat format, const Trace& trace) {
  if (format == TraceFormat::oracle) detail::write_oracle_trace(path, trace);
  else detail::write_text_trace(path, format == TraceFormat::csv, trace);
}

std::vector<std::int64_t> next_uses(const std::vector<Access>& accesses) {
  std::vector<std::int64_t> next(accesses.size(), -1);
  detail::FlatMap<std::int64_t> seen(1024);
  for (std::size_t i = accesses.size(); i-- > 0;) {
    bool inserted = false;
    std::int64_t& later = seen.get(accesses[i].id, -1, inserted);
    next[i] = later;
    later = static_cast<std::int64_t>(i);
  }
  return next;
}

}  // namespace ip::cache
