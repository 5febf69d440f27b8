// `indexpool inspect FILE`: a readable description of a results file (see results.h). Works on files of
// another schema_version, and on any HDF5 file, by falling back to a generic listing.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "experiments/h5.h"
#include "experiments/results.h"

namespace ip::exp {
namespace {

// A value on one line, or on indented lines after the name when it has several (config_text).
std::string attr_line(const std::string& indent, const std::string& name, const std::string& value) {
  if (value.find('\n') == std::string::npos) return fmt::format("{}{}: {}\n", indent, name, value);
  std::string s = fmt::format("{}{}:\n", indent, name);
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find('\n', start);
    if (end == std::string::npos) end = value.size();
    if (end > start || end < value.size()) s += fmt::format("{}  | {}\n", indent, value.substr(start, end - start));
    start = end + 1;
  }
  return s;
}

std::string shape_text(const std::vector<Index64>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

bool is_point_group(const std::string& name) {
  return name.size() == 12 && name.rfind("point_", 0) == 0 &&
         name.find_first_not_of("0123456789", 6) == std::string::npos;
}

// Every object under `group` (skipping `skip` at the top), with group attributes and dataset shapes. With
// `elide_points`, of more than kInspectPointGroups point_<index> groups at the top only the first 15 and the
// last 5 are listed, with a line counting the rest.
void list_tree(const h5::File& f, const std::string& group, const std::string& indent, const std::string& skip,
               std::string& out, bool elide_points = false) {
  const std::vector<std::string> names = f.list(group);
  std::size_t point_groups = 0;
  if (elide_points) point_groups = std::count_if(names.begin(), names.end(), is_point_group);
  const bool elide = point_groups > kInspectPointGroups;
  constexpr std::size_t kHead = kInspectPointGroups - 5, kTail = 5;
  std::size_t point_seen = 0;
  for (const auto& name : names) {
    if (name == skip) continue;
    if (elide && is_point_group(name)) {
      const std::size_t at = point_seen++;
      if (at == kHead)
        out += fmt::format("{}... {} more point_<index> groups like these ('indexpool inspect FILE --all' lists "
                           "every one)\n",
                           indent, point_groups - kHead - kTail);
      if (at >= kHead && at < point_groups - kTail) continue;
    }
    const std::string path = group == "/" ? name : group + "/" + name;
    if (f.is_group(path)) {
      std::string attrs;
      for (const auto& a : f.attr_names(path)) {
        std::string v = f.attr_text(path, a);
        if (v.size() > 60) v = v.substr(0, 57) + "...";
        attrs += fmt::format("{}{}={}", attrs.empty() ? "" : ", ", a, v);
      }
      out += fmt::format("{}{}/{}{}\n", indent, name, attrs.empty() ? "" : "  ", attrs);
      list_tree(f, path, indent + "  ", "", out);
    } else {
      const h5::DatasetInfo di = f.info(path);
      const std::string type = di.type_name.rfind("compound", 0) == 0 ? "table" : di.type_name;
      out += fmt::format("{}{}  {} {}\n", indent, name, type, shape_text(di.shape));
    }
  }
}

const char* kind_name(h5::Column::Kind k) {
  return k == h5::Column::Kind::kString ? "bytes" : k == h5::Column::Kind::kInt64 ? "int64" : "float64";
}

}  // namespace

std::string inspect_results(const std::string& path, bool all_points) {
  h5::File f(path, "r");
  std::string out = fmt::format("results file {}\n", path);
  bool known = false;
  if (!f.has_attr("/", "schema_version")) {
    out += "  no schema_version attribute: this is not an indexpool results file; listing it as plain HDF5\n";
  } else {
    const std::string version = f.attr_text("/", "schema_version");
    known = version == std::to_string(kSchemaVersion);
    if (!known)
      out += fmt::format(
          "  schema_version {} differs from the version this indexpool reads ({}): the file was written by another "
          "indexpool version; listing it as plain HDF5\n",
          version, kSchemaVersion);
  }
  out += "attributes:\n";
  for (const auto& a : f.attr_names("/")) out += attr_line("  ", a, f.attr_text("/", a));

  if (known && f.exists("points")) {
    try {
      const h5::Table t = f.read_table("points");
      std::map<std::string, std::size_t> by_status;
      for (const auto& s : t.column("status").strings) ++by_status[s];
      std::string counts;
      for (const auto& [status, n] : by_status)
        counts += fmt::format("{}{}: {}", counts.empty() ? "" : ", ", status, n);
      const std::string total =
          f.has_attr("/", "points_total") ? fmt::format(" of {}", f.attr_text("/", "points_total")) : "";
      out += fmt::format("points: {}{} ({})\n", t.rows(), total, counts.empty() ? "none" : counts);
      // The GPU kernel forms the points ran (point attribute run_kernels; absent in older files, "" on the cpu).
      std::map<std::string, std::size_t> forms;
      for (const std::int64_t i : t.column("index").ints) {
        const std::string g = fmt::format("point_{:06d}", i);
        if (f.exists(g) && f.has_attr(g, "run_kernels"))
          if (const std::string k = f.attr_text(g, "run_kernels"); !k.empty()) ++forms[k];
      }
      if (!forms.empty()) {
        out += "kernel forms the points ran (attribute run_kernels of point_<index>):\n";
        for (const auto& [k, n] : forms) out += fmt::format("  {} point{}: {}\n", n, n == 1 ? "" : "s", k);
      }
      out += "table /points columns:\n";
      for (const auto& c : t.columns) out += fmt::format("  {} ({})\n", c.name, kind_name(c.kind));
    } catch (const Error& e) {
      out += fmt::format("points: cannot read the /points table: {}\n", e.what());
    }
  }
  out += "objects:\n";
  list_tree(f, "/", "  ", "", out, known && !all_points);
  return out;
}

std::string table_tsv(const std::string& path, const std::string& table) {
  const h5::File f(path, "r");
  const std::string name = !table.empty() && table[0] == '/' ? table.substr(1) : table;
  IP_REQUIRE(!name.empty() && f.exists(name) && !f.is_group(name),
             "{}: no table '{}' ('indexpool inspect {}' lists the file's tables)", path, table, path);
  h5::Table t;
  try {
    t = f.read_table(name);
  } catch (const Error& e) {
    throw Error(fmt::format("{} ('indexpool inspect {}' lists the file's tables)", e.what(), path));
  }
  const auto escaped = [](const std::string& v) {
    std::string o;
    for (char c : v) {
      if (c == '\t') o += "\\t";
      else if (c == '\n') o += "\\n";
      else if (c == '\\') o += "\\\\";
      else o += c;
    }
    return o;
  };
  std::string out;
  for (std::size_t c = 0; c < t.columns.size(); ++c) out += (c ? "\t" : "") + escaped(t.columns[c].name);
  out += '\n';
  for (std::size_t r = 0; r < t.rows(); ++r) {
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      const h5::Column& col = t.columns[c];
      if (c) out += '\t';
      switch (col.kind) {
        case h5::Column::Kind::kString: out += escaped(col.strings[r]); break;
        case h5::Column::Kind::kInt64: out += fmt::format("{}", col.ints[r]); break;
        case h5::Column::Kind::kFloat64: out += fmt::format("{}", col.floats[r]); break;
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace ip::exp
