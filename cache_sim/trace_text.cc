// Text traces: txt ("id [size [score]]") and csv (named columns).
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "cache_sim/trace.h"

namespace ip::cache::detail {

namespace {

enum Column { kId, kSize, kScore, kRequest, kStep, kColumns };
constexpr const char* kColumnNames[kColumns] = {"id", "size", "score", "request", "step"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct LineError {
  const std::string& path;
  std::size_t line;
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}:{}: {}", path, line, what)); }
};

template <class T>
T parse_uint(std::string_view field, const char* name, const LineError& where) {
  T v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size())
    where.fail(fmt::format("{} '{}' is not an unsigned integer{}", name, field,
                           ec == std::errc::result_out_of_range ? " in range" : ""));
  return v;
}

float parse_score(std::string_view field, const LineError& where) {
  float v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec == std::errc::invalid_argument || end != field.data() + field.size())
    where.fail(fmt::format("score '{}' is not a number", field));
  if (ec != std::errc() || !std::isfinite(v) || v < 0)
    where.fail(fmt::format("score '{}' must be a finite float >= 0", field));
  return v;
}

void set_field(Access& a, int column, std::string_view field, const LineError& where) {
  switch (column) {
    case kId: a.id = parse_uint<std::uint64_t>(field, "id", where); break;
    case kSize: a.size = parse_uint<std::uint32_t>(field, "size", where); break;
    case kScore: a.score = parse_score(field, where); break;
    case kRequest: a.request = parse_uint<std::uint32_t>(field, "request", where); break;
    case kStep: a.step = parse_uint<std::uint32_t>(field, "step", where); break;
  }
}

// Splits on `sep` (csv) or on runs of blanks (txt).
std::vector<std::string_view> split(std::string_view line, bool csv) {
  std::vector<std::string_view> out;
  if (csv) {
    for (;;) {
      const auto c = line.find(',');
      out.push_back(trim(line.substr(0, c)));
      if (c == std::string_view::npos) break;
      line.remove_prefix(c + 1);
    }
    return out;
  }
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

Trace stream_text_trace(const std::string& path, bool csv, const AccessSink& sink, std::size_t chunk,
                        std::size_t block) {
  std::ifstream in(path, std::ios::binary);
  IP_REQUIRE(in.good(), "trace '{}': cannot open: {}", path, std::strerror(errno));

  Trace t;
  std::vector<Access> out;
  out.reserve(chunk);
  std::vector<int> columns = {kId, kSize, kScore};  // txt: positional
  bool header_seen = !csv;
  std::size_t line_no = 0;
  const auto take_line = [&](std::string_view line) {
    ++line_no;
    const LineError where{path, line_no};
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) return;
    const auto fields = split(line, csv);
    if (!header_seen) {
      header_seen = true;
      columns.clear();
      bool seen[kColumns] = {};
      for (std::string_view name : fields) {
        int c = 0;
        while (c < kColumns && name != kColumnNames[c]) ++c;
        if (c == kColumns) where.fail(fmt::format("unknown column '{}' (known: id, size, score, request, step)", name));
        if (seen[c]) where.fail(fmt::format("column '{}' appears twice", name));
        seen[c] = true;
        columns.push_back(c);
      }
      if (!seen[kId]) where.fail("the header names no 'id' column");
      t.has_request = seen[kRequest];
      t.has_step = seen[kStep];
      return;
    }
    if (csv ? fields.size() != columns.size() : fields.size() > columns.size())
      where.fail(fmt::format("{} fields, expected {}", fields.size(),
                             csv ? fmt::format("{}", columns.size()) : std::string("1 to 3 (id [size [score]])")));
    Access a;
    for (std::size_t i = 0; i < fields.size(); ++i) set_field(a, columns[i], fields[i], where);
    out.push_back(a);
    if (out.size() == chunk) {
      sink(out.data(), out.size());
      out.clear();
    }
  };
  // Blocks of the file; a line cut at a block's end is carried over to the next.
  IP_REQUIRE(block > 0, "stream_text_trace: blocks of 0 bytes");
  const std::size_t kBlock = block;
  std::string text;
  std::size_t carried = 0;
  for (bool end = false; !end;) {
    text.resize(carried + kBlock);
    in.read(text.data() + carried, static_cast<std::streamsize>(kBlock));
    IP_REQUIRE(!in.bad(), "trace '{}': read error", path);
    const std::size_t size = carried + static_cast<std::size_t>(in.gcount());
    end = size < carried + kBlock;
    std::size_t pos = 0;
    for (;;) {
      const std::size_t eol = text.find('\n', pos);
      if (eol == std::string::npos || eol >= size) break;
      take_line(std::string_view(text.data() + pos, eol - pos));
      pos = eol + 1;
    }
    if (end && pos < size) take_line(std::string_view(text.data() + pos, size - pos));  // no final newline
    carried = end ? 0 : size - pos;
    if (carried) std::memmove(text.data(), text.data() + pos, carried);
  }
  if (!out.empty()) sink(out.data(), out.size());
  IP_REQUIRE(header_seen, "trace '{}': empty csv file (no header line)", path);
  return t;
}

void write_text_trace(const std::string& path, bool csv, const Trace& trace) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  IP_REQUIRE(out.good(), "trace '{}': cannot create", path);
  fmt::memory_buffer buf;
  if (csv) fmt::format_to(std::back_inserter(buf), "id,size,score,request,step\n");
  else fmt::format_to(std::back_inserter(buf), "# id size score\n");
  for (const Access& a : trace.accesses) {
    if (csv) fmt::format_to(std::back_inserter(buf), "{},{},{},{},{}\n", a.id, a.size, a.score, a.request, a.step);
    else fmt::format_to(std::back_inserter(buf), "{} {} {}\n", a.id, a.size, a.score);
    if (buf.size() > (1 << 20)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  out.close();
  IP_REQUIRE(!out.fail(), "trace '{}': write failed", path);
}

}  // namespace ip::cache::detail
