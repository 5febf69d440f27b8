#include "cache_sim/trace.h"

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

Trace read_trace(const std::string& path, TraceFormat format) {
  Trace t = format == TraceFormat::oracle ? detail::read_oracle_trace(path)
                                          : detail::read_text_trace(path, format == TraceFormat::csv);
  t.source = path;
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
