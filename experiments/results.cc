// The results file of a sweep: its HDF5 layout, crash-safe appends (copy, fsync, rename), the writer
// lock, merging shard files and a text description (see results.h).
#include "experiments/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/provenance.h"
#include "experiments/config.h"
#include "experiments/h5.h"
#include "experiments/profiling.h"

namespace ip::exp {

void clear_metrics(PointSummary& s) {
  for (double* v : {&s.tokens, &s.index_bytes_per_token, &s.exact_bytes_per_token, &s.macs_per_query,
                    &s.exact_macs_per_query, &s.token_recall, &s.block_recall, &s.mass_recall, &s.output_error,
                    &s.pool_ms, &s.score_ms, &s.topk_ms, &s.attention_ms, &s.wall_s, &s.cache_l1_hit_rate,
                    &s.cache_l2_hit_rate, &s.cache_l3_hit_rate, &s.cache_hit_rate, &s.cache_opt_hit_rate,
                    &s.cache_opt_single_hit_rate, &s.layer_ms, &s.local_ms, &s.local_prefill_ms,
                    &s.layer_output_error, &s.layer_mass_recall, &s.layer_tokens_per_step, &s.repooled_fraction_mean,
                    &s.pool_hidden_ms, &s.tokens_per_group})
    *v = kNoValue;
}

namespace {

namespace fs = std::filesystem;
using Kind = h5::Column::Kind;

// The PointSummary numbers, in table order (float64 columns after index, key, axes, status, reason,
// run_backend, run_device).
// clang-format off
constexpr const char* kNumberColumns[] = {
    "tokens", "index_bytes_per_token", "exact_bytes_per_token", "macs_per_query", "exact_macs_per_query",
    "token_recall", "block_recall", "mass_recall", "output_error", "pool_ms", "score_ms", "topk_ms", "attention_ms",
    "wall_s", "cache_l1_hit_rate", "cache_l2_hit_rate", "cache_l3_hit_rate", "cache_hit_rate", "cache_opt_hit_rate",
    "cache_opt_single_hit_rate",
    "layer_ms", "local_ms", "local_prefill_ms", "layer_output_error", "layer_mass_recall", "layer_tokens_per_step",
    "repooled_fraction_mean", "pool_hidden_ms", "tokens_per_group"};
// clang-format on
constexpr const char* kStepColumns[] = {"token_recall", "block_recall", "mass_recall", "output_error",
                                        "pool_ms",      "score_ms",     "topk_ms",     "attention_ms",
                                        "context_tokens", "local_ms", "layer_ms", "layer_output_error",
                                        "layer_mass_recall", "layer_tokens", "repooled_fraction", "pool_hidden_ms"};
constexpr const char* kStepUnits =
    "request, step: indices; *_recall, repooled_fraction (groups re-pooled this step / groups; 1 = full build, "
    "0 = no update): fractions in [0, 1]; output_error, layer_output_error: relative, no unit; *_ms: milliseconds "
    "of wall clock this step (pool_ms: 0 on steps that did not build or update the index; on a GPU backend it "
    "starts from index keys already on the device, copied there before its clock, after an untimed first "
    "build of the request that allocated its buffers and loaded its kernels, and includes the copy of "
    "the index back to the host; pool_hidden_ms: of the asynchronous update begun this step, the milliseconds of its "
    "device time that overlapped the main stream's window until the update was waited for, from CUDA events, 0 on "
    "steps that began none, NaN where not measured, e.g. the cpu backend); context_tokens, layer_tokens: tokens";
constexpr const char* kUnits =
    "index: position in the sweep's point list; tokens: mean over requests of the context length in tokens (a "
    "growing context: after its last step, as index_bytes_per_token and macs_per_query); index_bytes_per_token, "
    "exact_bytes_per_token: bytes; macs_per_query, exact_macs_per_query: multiply-adds; token_recall, "
    "block_recall, mass_recall: fractions in [0, 1]; output_error: relative, no unit; *_ms: milliseconds "
    "(median over steps; pool_ms over the steps that built or updated the index, see the steps table's units); wall_s: seconds; cache_*_hit_rate: fractions in [0, 1] (cache_l<i>: of the accesses "
    "reaching level i; cache_hit_rate: of all accesses; cache_opt_hit_rate: the same hierarchy with Belady's OPT at every level, a "
    "reference and not a bound; cache_opt_single_hit_rate: Belady's OPT on one cache holding as many objects as all "
    "levels together, an upper bound on cache_hit_rate for any policies and mode, NaN when objects differ in size); "
    "layer_ms, local_ms, local_prefill_ms: milliseconds (median); pool_hidden_ms: milliseconds (median over the "
    "steps that began an asynchronous update; NaN on the cpu backend or without asynchronous updates); "
    "layer_output_error: relative; "
    "layer_mass_recall, repooled_fraction_mean: fractions; layer_tokens_per_step, tokens_per_group: tokens";
constexpr const char* kCacheLevelUnits =
    "level: 1 = closest to the indexer; policy: the level's eviction policy; capacity: as configured (bytes with a "
    "unit such as KiB, or entries); accesses, hits, misses, evictions: counts of accesses (objects: groups' index "
    "entries or KV blocks, cache.object); bytes_from_below: bytes read from the next level or memory; hit_rate, "
    "opt_hit_rate: fractions in [0, 1] of the accesses reaching this level (opt_hit_rate: the same level under "
    "Belady's OPT, NaN when cache.opt_bound is off)";
constexpr const char* kCacheMrcUnits =
    "capacity_entries: cache capacity in objects (entries); miss_ratio: fraction in [0, 1] of all accesses that "
    "miss an LRU cache of that capacity";
constexpr Index64 kChunkRows = 128;  // the /points table is extendible, one chunk per 128 rows

std::vector<double> numbers(const PointSummary& s) {
  // clang-format off
  return {s.tokens, s.index_bytes_per_token, s.exact_bytes_per_token, s.macs_per_query, s.exact_macs_per_query,
          s.token_recall, s.block_recall, s.mass_recall, s.output_error, s.pool_ms, s.score_ms, s.topk_ms,
          s.attention_ms, s.wall_s, s.cache_l1_hit_rate, s.cache_l2_hit_rate, s.cache_l3_hit_rate, s.cache_hit_rate,
          s.cache_opt_hit_rate, s.cache_opt_single_hit_rate, s.layer_ms, s.local_ms, s.local_prefill_ms, s.layer_output_error, s.layer_mass_recall,
          s.layer_tokens_per_step, s.repooled_fraction_mean, s.pool_hidden_ms, s.tokens_per_group};
  // clang-format on
}

std::vector<double> numbers(const StepRecord& s) {
  return {s.token_recall,   s.block_recall, s.mass_recall, s.output_error,       s.pool_ms,
          s.score_ms,       s.topk_ms,      s.attention_ms, s.context_tokens,    s.local_ms,
          s.layer_ms,       s.layer_output_error, s.layer_mass_recall, s.layer_tokens, s.repooled_fraction,
          s.pool_hidden_ms};
}

std::string group_name(std::size_t index) { return fmt::format("point_{:06d}", index); }

// The empty /points table of a sweep with these axes.
h5::Table points_table(const std::vector<std::string>& axis_keys) {
  h5::Table t;
  t.add("index", Kind::kInt64);
  t.add("key", Kind::kString);
  for (const auto& a : axis_keys) t.add(a, Kind::kString);
  t.add("status", Kind::kString);
  t.add("reason", Kind::kString);
  t.add("run_backend", Kind::kString);
  t.add("run_device", Kind::kString);
  for (const char* n : kNumberColumns) t.add(n, Kind::kFloat64);
  return t;
}

// Appends row r of `src` to `dst` (same columns).
void copy_row(h5::Table& dst, const h5::Table& src, std::size_t r) {
  for (std::size_t c = 0; c < dst.columns.size(); ++c) {
    const h5::Column& s = src.columns[c];
    h5::Column& d = dst.columns[c];
    if (s.kind == Kind::kString)
      d.strings.push_back(s.strings[r]);
    else if (s.kind == Kind::kInt64)
      d.ints.push_back(s.ints[r]);
    else
      d.floats.push_back(s.floats[r]);
  }
}

h5::Table one_row(const PointRecord& rec, const std::vector<std::string>& axis_keys) {
  h5::Table t = points_table(axis_keys);
  std::size_t c = 0;
  t.columns[c++].ints.push_back(static_cast<std::int64_t>(rec.index));
  t.columns[c++].strings.push_back(rec.key);
  for (const auto& a : rec.axes) t.columns[c++].strings.push_back(a.second);
  t.columns[c++].strings.push_back(rec.summary.status);
  t.columns[c++].strings.push_back(rec.summary.reason);
  t.columns[c++].strings.push_back(rec.summary.backend);
  t.columns[c++].strings.push_back(rec.summary.device);
  for (double v : numbers(rec.summary)) t.columns[c++].floats.push_back(v);
  return t;
}

bool same_columns(const h5::Table& a, const h5::Table& b) {
  if (a.columns.size() != b.columns.size()) return false;
  for (std::size_t c = 0; c < a.columns.size(); ++c)
    if (a.columns[c].name != b.columns[c].name || a.columns[c].kind != b.columns[c].kind) return false;
  return true;
}

std::string column_names(const h5::Table& t) {
  std::string s;
  for (const auto& c : t.columns) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

// How the columns of `a` (called a_name) and `b` differ, by name: the columns only one of them has, or,
// with the same names, that their order or types differ. For messages (tables of ~70 columns).
std::string column_difference(const h5::Table& a, const std::string& a_name, const h5::Table& b,
                              const std::string& b_name) {
  const auto only_in = [](const h5::Table& x, const h5::Table& y) {
    std::string s;
    for (const auto& c : x.columns) {
      bool found = false;
      for (const auto& d : y.columns) found = found || d.name == c.name;
      if (!found) s += (s.empty() ? "" : ", ") + c.name;
    }
    return s;
  };
  const std::string in_a = only_in(a, b), in_b = only_in(b, a);
  if (in_a.empty() && in_b.empty())
    return fmt::format("the same {} column names, in another order or with other types ({}: {}; {}: {})", a.columns.size(),
                       a_name, column_names(a), b_name, column_names(b));
  std::string s;
  if (!in_a.empty()) s += fmt::format("only {} has: {}", a_name, in_a);
  if (!in_b.empty()) s += fmt::format("{}only {} has: {}", s.empty() ? "" : "; ", b_name, in_b);
  return s;
}

// " (written by indexpool <git revision>)" when the file says, else "".
std::string written_by(const h5::File& f) {
  if (!f.has_attr("/", "git_revision")) return "";
  return fmt::format(" (written by indexpool at git revision {})", f.attr_string("/", "git_revision"));
}

// Why a sweep id may differ though the settings read the same: "" or ", or an imported file: ..." naming
// the file's imported_workloads and this run's.
std::string imports_changed(const h5::File& f, const SweepMeta& m) {
  const std::string was = f.has_attr("/", "imported_workloads") ? f.attr_text("/", "imported_workloads") : "";
  if (was == m.imports || m.imports.empty()) return "";
  return fmt::format(", or an imported file: the results hold {}; now {}", was.empty() ? "(not recorded)" : was,
                     m.imports);
}

// The settings behind two sweep ids (SweepMeta::sweep_settings, a line "key=v1,v2," each): ", which differ in
// a.b: 1,2 in the results, 1,2,4 now; ..." (the first `most`), or "" when the file does not record them.
std::string settings_changed(const h5::File& f, const SweepMeta& m, std::size_t most = 6) {
  if (!f.has_attr("/", "sweep_settings") || m.sweep_settings.empty()) return "";
  const auto parse = [](const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("import ", 0) == 0) continue;  // an imported file's digest: imports_changed names those
      const auto eq = line.find('=');
      std::string v = eq == std::string::npos ? "" : line.substr(eq + 1);
      if (!v.empty() && v.back() == ',') v.pop_back();
      out[eq == std::string::npos ? line : line.substr(0, eq)] = v;
    }
    return out;
  };
  const auto was = parse(f.attr_text("/", "sweep_settings")), now = parse(m.sweep_settings);
  std::vector<std::string> diffs;
  const auto show = [](const std::map<std::string, std::string>& s, const std::string& k) {
    const auto it = s.find(k);
    return it == s.end() ? std::string("unset") : "'" + it->second + "'";
  };
  std::set<std::string> keys;
  for (const auto& [k, v] : was) keys.insert(k);
  for (const auto& [k, v] : now) keys.insert(k);
  for (const auto& k : keys)
    if (show(was, k) != show(now, k)) diffs.push_back(fmt::format("{}: {} in the file, {} now", k, show(was, k), show(now, k)));
  if (diffs.empty()) return "";
  std::string out = ": ";
  for (std::size_t i = 0; i < diffs.size() && i < most; ++i) out += (i ? "; " : "") + diffs[i];
  if (diffs.size() > most) out += fmt::format("; and {} more", diffs.size() - most);
  return out;
}

void write_root_attrs(h5::File& f, const SweepMeta& m) {
  f.set_attr("/", "schema_version", std::int64_t{kSchemaVersion});
  const std::pair<const char*, const std::string*> strings[] = {{"tool_version", &m.tool_version},
                                                                {"git_revision", &m.git_revision},
                                                                {"config_text", &m.config_text},
                                                                {"config_path", &m.config_path},
                                                                {"argv", &m.argv},
                                                                {"host", &m.host},
                                                                {"backend", &m.backend},
                                                                {"device", &m.device}};
  for (const auto& [name, value] : strings) f.set_attr("/", name, *value);
  f.set_attr("/", "created_utc", utc_now());
  f.set_attr("/", "sweep_id", m.sweep_id);
  if (!m.sweep_settings.empty()) f.set_attr("/", "sweep_settings", m.sweep_settings);
  f.set_attr("/", "points_total", m.points_total);
  f.set_attr("/", "shard", m.shard);
  f.set_attr("/", "units", std::string(kUnits));
  if (!m.imports.empty()) f.set_attr("/", "imported_workloads", m.imports);
  if (!m.started_utc.empty()) f.set_attr("/", "started_utc", m.started_utc);
}

void write_point(h5::File& f, const PointRecord& rec) {
  const std::string g = group_name(rec.index);
  f.create_group(g);
  f.set_attr(g, "key", rec.key);
  f.set_attr(g, "status", rec.summary.status);
  f.set_attr(g, "reason", rec.summary.reason);
  f.set_attr(g, "run_backend", rec.summary.backend);
  f.set_attr(g, "run_device", rec.summary.device);
  f.set_attr(g, "run_kernels", rec.summary.kernels);
  for (const auto& [axis, value] : rec.axes) f.set_attr(g, axis, value);
  h5::Table steps;
  steps.add("request", Kind::kInt64);
  steps.add("step", Kind::kInt64);
  for (const char* n : kStepColumns) steps.add(n, Kind::kFloat64);
  auto& request = steps.columns[0].ints;
  auto& step = steps.columns[1].ints;
  for (std::size_t b = 0; b < rec.requests.size(); ++b) {
    for (std::size_t s = 0; s < rec.requests[b].steps.size(); ++s) {
      request.push_back(static_cast<std::int64_t>(b));
      step.push_back(static_cast<std::int64_t>(s));
      const std::vector<double> v = numbers(rec.requests[b].steps[s]);
      for (std::size_t c = 0; c < v.size(); ++c) steps.columns[2 + c].floats.push_back(v[c]);
    }
  }
  f.write_table(g + "/steps", steps);
  write_profile(f, g, rec.profile);
  f.set_attr(g + "/steps", "units", std::string(kStepUnits));
  if (!rec.cache.levels.empty()) {
    h5::Table lv;
    lv.add("level", Kind::kInt64);
    lv.add("policy", Kind::kString);
    lv.add("capacity", Kind::kString);
    for (const char* n : {"accesses", "hits", "misses", "evictions", "bytes_from_below", "hit_rate", "opt_hit_rate"})
      lv.add(n, Kind::kFloat64);
    for (std::size_t i = 0; i < rec.cache.levels.size(); ++i) {
      const CacheLevelResult& l = rec.cache.levels[i];
      lv.columns[0].ints.push_back(static_cast<std::int64_t>(i + 1));
      lv.columns[1].strings.push_back(l.policy);
      lv.columns[2].strings.push_back(l.capacity);
      const double v[] = {l.accesses, l.hits, l.misses, l.evictions, l.bytes_from_below, l.hit_rate, l.opt_hit_rate};
      for (std::size_t c = 0; c < 7; ++c) lv.columns[3 + c].floats.push_back(v[c]);
    }
    f.write_table(g + "/cache_levels", lv);
    f.set_attr(g + "/cache_levels", "units", std::string(kCacheLevelUnits));
    if (!rec.cache.mrc_capacity.empty()) {
      h5::Table mrc;
      mrc.add("capacity_entries", Kind::kFloat64).floats = rec.cache.mrc_capacity;
      mrc.add("miss_ratio", Kind::kFloat64).floats = rec.cache.mrc_miss_ratio;
      f.write_table(g + "/cache_mrc", mrc);
      f.set_attr(g + "/cache_mrc", "units", std::string(kCacheMrcUnits));
    }
  }
  for (std::size_t b = 0; b < rec.requests.size(); ++b) {
    const RequestDetail& d = rec.requests[b];
    if (d.composite_keys.empty() && d.selected.empty()) continue;
    const std::string where = b == 0 ? g : fmt::format("{}/request_{}", g, b);
    if (b > 0) f.create_group(where);
    if (!d.composite_keys.empty()) f.write(where + "/composite_keys", d.composite_keys);
    if (!d.selected.empty()) {
      const Index64 n = static_cast<Index64>(d.selected.size());
      IP_REQUIRE(d.k_groups > 0 && n % d.k_groups == 0,
                 "point '{}', request {}: {} selected ids are not a multiple of k_groups = {}", rec.key, b, n,
                 d.k_groups);
      f.write(where + "/selected_groups", d.selected, {n / d.k_groups, d.k_groups});
    }
  }
}

void sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  IP_REQUIRE(fd >= 0, "cannot open '{}' to sync it: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  IP_REQUIRE(rc == 0 || (directory && err == EINVAL), "fsync of '{}' failed: {}", path, std::strerror(err));
}

// Copies `from` into a new file `to`, naming the system's error (fs::copy_file reported a full disk as
// "Input/output error").
void copy_contents(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  IP_REQUIRE(in >= 0, "cannot read '{}': {}", from, std::strerror(errno));
  struct stat st {};
  const mode_t mode = ::fstat(in, &st) == 0 ? (st.st_mode & 07777) : 0644;
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    throw Error(fmt::format("cannot create '{}': {}", to, std::strerror(err)));
  }
  std::vector<char> buf(1 << 20);
  int err = 0;
  const char* failed = "read";
  while (err == 0) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    for (ssize_t done = 0; done < n && err == 0;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<std::size_t>(n - done));
      if (w >= 0) done += w;
      else if (errno != EINTR) err = errno, failed = "write";
    }
  }
  if (::close(out) != 0 && err == 0) err = errno, failed = "write";
  ::close(in);
  IP_REQUIRE(err == 0, "cannot copy '{}' to '{}' ({} failed): {}", from, to, failed, std::strerror(err));
}

// output.path is replaced by renaming a new file over it: only a regular file (or nothing) may be there.
// A symbolic link is refused, not followed (the rename would replace the link and leave its target as it was).
void check_replaceable(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (fs::is_symlink(st)) {
    const fs::path target = fs::read_symlink(path, ec);
    throw Error(fmt::format("results file '{}' is a symbolic link (to '{}'); indexpool does not write through links: "
                            "give output.path the file itself",
                            path, target.string()));
  }
  IP_REQUIRE(fs::is_regular_file(st),
             "results file '{}' exists and is not a regular file (a {}); indexpool replaces only regular files: "
             "give output.path another name",
             path,
             fs::is_fifo(st)             ? "FIFO"
             : fs::is_block_file(st)     ? "block device"
             : fs::is_character_file(st) ? "character device"
             : fs::is_socket(st)         ? "socket"
             : fs::is_directory(st)      ? "folder"
                                         : "special file");
}

std::string folder_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

// `<path>.lock`, held with flock for the life of the writer (the kernel drops it when the process dies).
// Removes every `<path>.tmp-*` beside `path`: call it holding path's lock (Lock), when any such file is left
// over from a run or merge that was killed (each writes its own `<path>.tmp-<pid>` under the lock).
void remove_stale_temporaries(const std::string& path) {
  const std::string stale = fs::path(path).filename().string() + ".tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder_of(path), ec))
    if (e.path().filename().string().rfind(stale, 0) == 0) fs::remove(e.path(), ec);
}

class Lock {
 public:
  explicit Lock(const std::string& target) : path_(target + ".lock") {
    for (int attempt = 0; attempt < 100; ++attempt) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      IP_REQUIRE(fd_ >= 0, "cannot create the lock file '{}': {}", path_, std::strerror(errno));
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd_);
        IP_REQUIRE(err != EWOULDBLOCK,
                   "another indexpool run is writing '{}' (it holds the lock '{}'); wait for it to finish or write "
                   "to another path",
                   target, path_);
        throw Error(fmt::format("cannot lock '{}': {}", path_, std::strerror(err)));
      }
      // The previous holder unlinks the lock file when it finishes: make sure we locked the current one.
      struct stat held {
      }, now{};
      if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
          held.st_dev == now.st_dev)
        return;
      ::close(fd_);
    }
    throw Error(fmt::format("cannot lock '{}': it keeps being replaced", path_));
  }
  ~Lock() {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

struct ResultsFile::Impl {
  Impl(const std::string& p, const SweepMeta& m) : path(p), meta(m), lock(p), rows(points_table(m.axis_keys)) {}
  std::string path;
  SweepMeta meta;
  Lock lock;
  bool on_disk = false;  // `path` holds this sweep's file (resumed, or written by an append)
  h5::Table rows;        // the /points table as it is on disk
  std::set<std::string> keys;       // of the points on disk and held
  std::set<std::int64_t> indices;   // the same
  std::vector<PointRecord> held;    // appended, not yet written (FlushPolicy::kBoundedOverhead)
  FlushPolicy policy = FlushPolicy::kEveryAppend;
  double last_write_s = 0;          // how long the last write took
  bool write_failed = false;        // the last flush threw (its error went to the caller)
  bool restamp_shard = false;       // resumed as the whole sweep: the file's shard attribute becomes meta.shard
  std::string resumed_shard;        // the shard attribute of the file resumed (before any restamp)
  bool resumed = false;             // opened an existing file with --resume: its first write adds to resumed_by
  bool resume_noted = false;        // that line is on disk
  std::time_t began = -1;           // resumed: when the file's sweep began (sweep_began)
  // Resumed: the file's points skipped for a reason that may have gone (skip_may_change), which run again.
  // Their old rows stay in `rows` and on disk (not in keys / indices) until a new record of the point is
  // written: that write removes the old row and group.
  std::set<std::int64_t> retried;
  std::chrono::steady_clock::time_point last_write_end{};
};

ResultsFile::ResultsFile(const std::string& path, const SweepMeta& meta, bool resume, bool overwrite) {
  const h5::Table columns = points_table(meta.axis_keys);
  for (std::size_t c = 0; c < columns.columns.size(); ++c)
    for (std::size_t d = 0; d < c; ++d)
      IP_REQUIRE(columns.columns[c].name != columns.columns[d].name,
                 "results file '{}': column '{}' appears twice (axis keys: a repeated axis, or one named like a "
                 "fixed column)",
                 path, columns.columns[c].name);
  IP_REQUIRE(fs::is_directory(folder_of(path)), "results file '{}': folder '{}' does not exist", path, folder_of(path));
  check_replaceable(path);
  impl_ = std::make_unique<Impl>(path, meta);
  if (fs::exists(path)) {
    IP_REQUIRE(resume || overwrite,
               "results file '{}' already exists; pass --resume to continue that sweep or --overwrite to replace it",
               path);
    if (resume) {
      h5::File f(path, "r");
      IP_REQUIRE(f.has_attr("/", "schema_version") && f.has_attr("/", "sweep_id"),
                 "cannot resume '{}': it has no schema_version or sweep_id attribute (not an indexpool results file)",
                 path);
      const std::int64_t version = f.attr_int("/", "schema_version");
      IP_REQUIRE(version == kSchemaVersion,
                 "cannot resume '{}': it has schema_version {}, this indexpool writes schema_version {}; write to a "
                 "new path or pass --overwrite",
                 path, version, kSchemaVersion);
      const std::string sweep = f.attr_string("/", "sweep_id");
      IP_REQUIRE(sweep == meta.sweep_id,
                 "cannot resume '{}': it holds sweep_id {}, the current configuration has sweep_id {} (the settings "
                 "differ{}{}); write to a new path or pass --overwrite",
                 path, sweep, meta.sweep_id, settings_changed(f, meta), imports_changed(f, meta));
      // A shard's file resumed as another shard would hold both and still name the first (merge reads it):
      // refused. Resumed as the whole sweep (0/1), any file (a shard's, a merged one) is completed, and says so.
      const std::string shard = f.has_attr("/", "shard") ? f.attr_text("/", "shard") : meta.shard;
      const auto single = [](const std::string& s) {
        return !s.empty() && s.find(',') == std::string::npos && s.find('/') != std::string::npos;
      };
      if (shard != meta.shard && meta.shard != "0/1") {
        IP_REQUIRE(!single(shard),
                   "cannot resume '{}': it holds shard {} of the sweep, this run is shard {}; resume it with --shard "
                   "{}, or write each shard to a file of its own and join them with indexpool merge",
                   path, shard, meta.shard, shard);
        throw Error(fmt::format("cannot resume '{}' as shard {}: it holds {}; resume it as the whole sweep (without "
                                "--shard, and no Slurm array variables) to complete it, or write shard {} to a file of "
                                "its own and join it with indexpool merge",
                                path, meta.shard, shard.empty() ? "merged shards of different counts" :
                                "the merged shards " + shard, meta.shard));
      }
      // One shard's own file (not a merge of it) resumed without --shard: most likely a resume that forgot its
      // --shard, which would run every other shard's points into it and leave a file no merge of the other
      // shards accepts. Refused; completing it as the whole sweep goes through a merge (which says so).
      IP_REQUIRE(!(single(shard) && shard != "0/1" && meta.shard == "0/1" && !f.has_attr("/", "merged_from")),
                 "cannot resume '{}' as the whole sweep: it holds shard {} of it (a run with --shard {} wrote it); "
                 "resume it with --shard {}. To complete it as the whole sweep instead, join it into a new file "
                 "first (indexpool merge NEW.h5 {}) and resume that",
                 path, shard, shard, shard, path);
      impl_->restamp_shard = shard != meta.shard;
      impl_->resumed_shard = shard;
      h5::Table rows = f.read_table("points");
      IP_REQUIRE(same_columns(rows, columns),
                 "cannot resume '{}'{}: its /points columns differ from the ones this indexpool writes for this sweep "
                 "({}); an older or newer build wrote it. Write to a new path, or pass --overwrite",
                 path, written_by(f), column_difference(rows, "the file", columns, "this sweep"));
      // A point recorded as skipped for a reason that may have gone (no device, over the memory limit) holds
      // no results: it runs again, and until its new record is written the file keeps the old one.
      const h5::Column& status = rows.column("status");
      const h5::Column& reason = rows.column("reason");
      std::set<std::int64_t> seen;
      for (std::size_t r = 0; r < rows.rows(); ++r) {
        IP_REQUIRE(seen.insert(rows.columns[0].ints[r]).second,
                   "cannot resume '{}': its /points table holds point {} twice (not a file indexpool wrote)", path,
                   rows.columns[0].ints[r]);
        if (status.strings[r] == "skipped" && skip_may_change(reason.strings[r])) {
          impl_->retried.insert(rows.columns[0].ints[r]);
          continue;
        }
        impl_->keys.insert(rows.columns[1].strings[r]);
        impl_->indices.insert(rows.columns[0].ints[r]);
      }
      impl_->rows = std::move(rows);
      impl_->on_disk = true;
      impl_->resumed = true;
      for (const char* name : {"started_utc", "created_utc"})
        if (impl_->began < 0 && f.has_attr("/", name)) impl_->began = parse_utc(f.attr_text("/", name));
    }
  }
  remove_stale_temporaries(path);  // left over from a killed run
}

ResultsFile::~ResultsFile() {
  if (!impl_ || impl_->held.empty() || impl_->write_failed) return;  // a failed write was reported once
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());  // the points held are lost; --resume runs them again
  }
}

void ResultsFile::set_flush_policy(FlushPolicy policy) { impl_->policy = policy; }

bool ResultsFile::has(const std::string& point_key) const { return impl_->keys.count(point_key) > 0; }

std::size_t ResultsFile::size() const { return impl_->keys.size(); }  // not the retried points' old rows

bool skip_may_change(const std::string& reason) { return reason.rfind(kSkipBudgetOverContext, 0) != 0; }

std::size_t ResultsFile::retried() const { return impl_->retried.size(); }
std::string ResultsFile::completes_shards() const { return impl_->restamp_shard ? impl_->resumed_shard : ""; }

bool ResultsFile::resumed() const { return impl_->resumed; }
std::time_t ResultsFile::sweep_began() const { return impl_->began; }

std::size_t ResultsFile::held() const { return impl_->held.size(); }

void ResultsFile::append(const PointRecord& rec) {
  Impl& im = *impl_;
  IP_REQUIRE(!has(rec.key), "results file '{}': point '{}' is already in the file", im.path, rec.key);
  IP_REQUIRE(!im.indices.count(static_cast<std::int64_t>(rec.index)),
             "results file '{}': point index {} is already in the file (point '{}')", im.path, rec.index, rec.key);
  bool axes_match = rec.axes.size() == im.meta.axis_keys.size();
  for (std::size_t a = 0; axes_match && a < rec.axes.size(); ++a)
    axes_match = rec.axes[a].first == im.meta.axis_keys[a];
  IP_REQUIRE(axes_match, "results file '{}': point '{}' does not have the sweep's axes in order", im.path, rec.key);
  im.held.push_back(rec);
  im.keys.insert(rec.key);
  im.indices.insert(static_cast<std::int64_t>(rec.index));
  const double since_write =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - im.last_write_end).count();
  if (im.policy == FlushPolicy::kEveryAppend || since_write >= kFlushSpacing * im.last_write_s) flush();
}

void ResultsFile::flush() {
  Impl& im = *impl_;
  if (im.held.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  h5::Table batch = points_table(im.meta.axis_keys);
  for (const PointRecord& rec : im.held) copy_row(batch, one_row(rec, im.meta.axis_keys), 0);
  std::set<std::int64_t> replaced;  // retried points among the held ones
  for (const PointRecord& rec : im.held)
    if (im.retried.count(static_cast<std::int64_t>(rec.index))) replaced.insert(static_cast<std::int64_t>(rec.index));
  h5::Table filtered = points_table(im.meta.axis_keys);  // the rows on disk that stay, when some go
  for (std::size_t r = 0; !replaced.empty() && r < im.rows.rows(); ++r)
    if (!replaced.count(im.rows.columns[0].ints[r])) copy_row(filtered, im.rows, r);
  const h5::Table& kept = replaced.empty() ? im.rows : filtered;
  const std::string tmp = fmt::format("{}.tmp-{}", im.path, ::getpid());
  try {
    std::error_code ec;
    fs::remove(tmp, ec);
    if (im.on_disk) copy_contents(im.path, tmp);
    h5::File f(tmp, im.on_disk ? "a" : "w");
    if (!im.on_disk) write_root_attrs(f, im.meta);
    if (im.restamp_shard) f.set_attr("/", "shard", im.meta.shard);
    // The root attributes name the run that created the file; each run that resumed it adds a line here at
    // its first write (and every point group names the git revision that wrote it).
    if (im.resumed && !im.resume_noted)
      f.set_attr("/", "resumed_by",
                 fmt::format("{}{} on host {} (shard {}): {}; argv: {}",
                             f.has_attr("/", "resumed_by") ? f.attr_text("/", "resumed_by") + "\n" : "", utc_now(),
                             im.meta.host, im.meta.shard, im.meta.tool_version, im.meta.argv));
    // Retried points whose new record is in this write: their old rows and groups go.
    for (const std::int64_t i : replaced)
      if (f.exists(group_name(static_cast<std::size_t>(i)))) f.remove(group_name(static_cast<std::size_t>(i)));
    // A new file, replaced rows, or a string wider than its column: rewrite the table (HDF5 does not reuse
    // the old one's space, so the file grows by one table each time a column widens; widths double, so that
    // happens rarely).
    if (!im.on_disk || !replaced.empty() || !f.append_table("points", batch)) {
      if (im.on_disk) f.remove("points");
      h5::Table all = kept;
      for (std::size_t r = 0; r < batch.rows(); ++r) copy_row(all, batch, r);
      f.write_table("points", all, kChunkRows);
    }
    for (const PointRecord& rec : im.held) {
      write_point(f, rec);
      f.set_attr(group_name(rec.index), "git_revision", im.meta.git_revision);
    }
    f.close();
    sync_path(tmp, false);
    IP_REQUIRE(::rename(tmp.c_str(), im.path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, im.path,
               std::strerror(errno));
    sync_path(folder_of(im.path), true);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    im.write_failed = true;
    const std::string what = im.held.size() == 1
                                 ? fmt::format("point '{}'", im.held.front().key)
                                 : fmt::format("{} points ('{}' to '{}')", im.held.size(), im.held.front().key,
                                               im.held.back().key);
    throw Error(fmt::format("cannot append {} to results file '{}': {}", what, im.path, e.what()));
  }
  if (!replaced.empty()) {
    im.rows = std::move(filtered);
    for (const std::int64_t i : replaced) im.retried.erase(i);
  }
  for (std::size_t r = 0; r < batch.rows(); ++r) copy_row(im.rows, batch, r);
  im.held.clear();
  im.on_disk = true;
  im.resume_noted = im.resumed;
  im.write_failed = false;
  im.last_write_end = std::chrono::steady_clock::now();
  im.last_write_s = std::chrono::duration<double>(im.last_write_end - t0).count();
}

namespace {

// True when a running indexpool holds `<path>.lock` (it is writing `path`; its file is replaced whole at each
// write, so reading it gives the points written so far). A lock file nobody holds is stale: false.
bool being_written(const std::string& path) {
  const int fd = ::open((path + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases a shared lock taken here
  return held;
}

// The shards a file names in its attribute `shard` ("i/N" or a comma-separated list of them), as (i, N);
// empty when it has none or it does not parse.
std::vector<std::pair<std::int64_t, std::int64_t>> shards_of(const h5::File& f) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (!f.has_attr("/", "shard")) return out;
  const std::string text = f.attr_text("/", "shard");
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    long long i = -1, n = 0;
    char rest = 0;
    const std::string item = text.substr(at, comma - at);
    if (std::sscanf(item.c_str(), " %lld / %lld %c", &i, &n, &rest) != 2 || i < 0 || n < 1 || i >= n) return {};
    out.emplace_back(i, n);
    at = comma + 1;
  }
  return out;
}

// "1, 3-5, 9" (the first `most` runs, then "and N more").
std::string index_ranges(const std::vector<std::int64_t>& v, std::size_t most = 12) {
  std::string out;
  std::size_t runs = 0, i = 0;
  for (; i < v.size() && runs < most; ++runs) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]));
    i = j + 1;
  }
  if (i < v.size()) out += fmt::format(" and {} more", v.size() - i);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string describe_missing(const MergeSummary& m) {
  if (m.missing.empty()) return "";
  std::string out = fmt::format("{} of the sweep's {} points {} missing (point index{} {})", m.missing.size(),
                                m.points_total, m.missing.size() == 1 ? "is" : "are", m.missing.size() == 1 ? "" : "es",
                                index_ranges(m.missing));
  if (!m.missing_shards.empty())
    out += fmt::format("; no input holds shard{} {} (run {} with --shard, then merge again)",
                       m.missing_shards.size() == 1 ? "" : "s", join(m.missing_shards),
                       m.missing_shards.size() == 1 ? "it" : "them");
  if (!m.incomplete_shards.empty())
    out += fmt::format("; shard{} {} stopped before {} last point (--resume with the same --shard finishes {})",
                       m.incomplete_shards.size() == 1 ? "" : "s", join(m.incomplete_shards),
                       m.incomplete_shards.size() == 1 ? "its" : "their", m.incomplete_shards.size() == 1 ? "it" : "them");
  if (!m.running_shards.empty())
    out += fmt::format("; shard{} {} {} still running (merge again into a new file when {} finished)",
                       m.running_shards.size() == 1 ? "" : "s", join(m.running_shards),
                       m.running_shards.size() == 1 ? "is" : "are", m.running_shards.size() == 1 ? "it has" : "they have");
  return out;
}

namespace {

// Allocates `bytes` (a merge's inputs' size) of disk for `path` from its start without changing its size
// (fallocate KEEP_SIZE), so that writes below that offset cannot fail for want of space. Throws ip::Error,
// beginning with `what`, when the disk, a quota or the file-size limit (ulimit -f) leaves less; where the file
// system cannot allocate ahead (EOPNOTSUPP), it only compares the disk's free space (when it reports any).
void reserve_room(const std::string& path, std::uintmax_t bytes, const std::string& what) {
  struct rlimit lim {};
  IP_REQUIRE(::getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || bytes <= lim.rlim_cur,
             "{} can take as much as its inputs, {}, and the file-size limit (ulimit -f) is {}", what,
             format_bytes(static_cast<double>(bytes)), format_bytes(static_cast<double>(lim.rlim_cur)));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  IP_REQUIRE(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  const int rc = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
  const int err = errno;
  ::close(fd);
  if (rc == 0) return;
  if (err == EOPNOTSUPP || err == ENOSYS) {
    struct statvfs v {};
    IP_REQUIRE(::statvfs(path.c_str(), &v) != 0 || v.f_blocks == 0 ||
                   static_cast<double>(v.f_bavail) * v.f_frsize >= bytes,
               "{} can take as much as its inputs, {}, and its disk has {} free", what,
               format_bytes(static_cast<double>(bytes)),
               format_bytes(static_cast<double>(v.f_bavail) * v.f_frsize));
    return;
  }
  throw Error(fmt::format("{} can take as much as its inputs, {}, and that much disk cannot be claimed for it: {}", what,
                          format_bytes(static_cast<double>(bytes)), std::strerror(err)));
}

// Gives back what reserve_room allocated past the file's end (shrinking a file frees every block past its new
// size; growing it by one byte first makes it a shrink).
void release_unused_room(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (::truncate(path.c_str(), st.st_size + 1) == 0) IP_REQUIRE(::truncate(path.c_str(), st.st_size) == 0,
                                                                "cannot truncate '{}': {}", path, std::strerror(errno));
}

}  // namespace

std::string merge_temp_path(const std::string& out) { return fmt::format("{}.tmp-{}", out, ::getpid()); }

MergeSummary merge_results(const std::string& out, const std::vector<std::string>& inputs) {
  IP_REQUIRE(!inputs.empty(), "merge: no input files");
  IP_REQUIRE(!fs::exists(out), "merge: output '{}' already exists; choose a new path", out);
  // A run writing `out` holds its lock; it would rename its own file over ours at its next write.
  const Lock lock(out);
  remove_stale_temporaries(out);  // a merge (or run) to `out` that was killed
  // Every input stays open until the copy: a merge of many shards needs as many descriptors, more than the
  // usual soft limit of 1024; take what the hard limit allows.
  rlimit files_limit{};
  if (getrlimit(RLIMIT_NOFILE, &files_limit) == 0 && files_limit.rlim_cur < files_limit.rlim_max &&
      files_limit.rlim_cur < inputs.size() + 64) {
    files_limit.rlim_cur = files_limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files_limit);
  }
  std::vector<h5::File> files;
  std::vector<h5::Table> tables;
  for (const auto& in : inputs) {
    try {
      files.emplace_back(in, "r");
    } catch (const Error& e) {
      rlimit now{};
      const bool out_of_descriptors =  // h5::File's message carries the system's reason
          std::string_view(e.what()).find(std::strerror(EMFILE)) != std::string_view::npos &&
          getrlimit(RLIMIT_NOFILE, &now) == 0;
      throw Error(fmt::format("merge: {}{}", e.what(),
                              out_of_descriptors
                                  ? fmt::format(" (input {} of {}: a merge keeps every input open, and this process "
                                                "may open {}; raise `ulimit -n` or merge in steps: OUT may be an "
                                                "input of a later merge)",
                                                files.size() + 1, inputs.size(), static_cast<long long>(now.rlim_cur))
                                  : std::string()));
    }
    h5::File& f = files.back();
    IP_REQUIRE(f.has_attr("/", "schema_version") && f.has_attr("/", "sweep_id"),
               "merge: '{}' has no schema_version or sweep_id attribute (not an indexpool results file)", in);
    const std::int64_t version = f.attr_int("/", "schema_version");
    const std::string sweep = f.attr_string("/", "sweep_id");
    IP_REQUIRE(version == files[0].attr_int("/", "schema_version"), "merge: '{}' has schema_version {} but '{}' has {}",
               in, version, inputs[0], files[0].attr_int("/", "schema_version"));
    IP_REQUIRE(version == kSchemaVersion, "merge: '{}' has schema_version {}, this indexpool reads schema_version {}",
               in, version, kSchemaVersion);
    if (sweep != files[0].attr_string("/", "sweep_id")) {
      auto imported = [](const h5::File& g) {
        return g.has_attr("/", "imported_workloads") ? g.attr_text("/", "imported_workloads") : std::string();
      };
      const std::string mine = imported(f), first = imported(files[0]);
      throw Error(fmt::format("merge: '{}' has sweep_id {} but '{}' has sweep_id {}: they are not shards of one "
                              "sweep{}",
                              in, sweep, inputs[0], files[0].attr_string("/", "sweep_id"),
                              mine == first ? "" : fmt::format(" (their imported files differ: {}; {})",
                                                               mine.empty() ? "none" : mine,
                                                               first.empty() ? "none" : first)));
    }
    tables.push_back(f.read_table("points"));
    IP_REQUIRE(same_columns(tables.back(), tables[0]), "merge: the /points columns of '{}'{} and '{}' differ ({})", in,
               written_by(f), inputs[0],
               column_difference(tables.back(), fmt::format("'{}'", in), tables[0], fmt::format("'{}'", inputs[0])));
  }
  struct Entry {
    std::int64_t index;
    std::size_t file, row;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::size_t> key_file;
  std::map<std::int64_t, std::size_t> index_file;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    for (std::size_t r = 0; r < tables[i].rows(); ++r) {
      const std::string& key = tables[i].columns[1].strings[r];
      const std::int64_t index = tables[i].columns[0].ints[r];
      const auto [k, key_new] = key_file.emplace(key, i);
      IP_REQUIRE(key_new, "merge: point '{}' is in both '{}' and '{}'", key, inputs[k->second], inputs[i]);
      const auto [x, index_new] = index_file.emplace(index, i);
      IP_REQUIRE(index_new, "merge: point index {} is in both '{}' and '{}' with different keys", index,
                 inputs[x->second], inputs[i]);
      entries.push_back({index, i, r});
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.index < b.index; });
  // What the merged file lacks of the sweep, and which shards those points belong to.
  MergeSummary sum;
  sum.points = static_cast<std::int64_t>(entries.size());
  sum.points_total = files[0].has_attr("/", "points_total") ? files[0].attr_int("/", "points_total") : sum.points;
  for (std::int64_t i = 0; i < sum.points_total; ++i)
    if (!index_file.count(i)) sum.missing.push_back(i);
  std::set<std::pair<std::int64_t, std::int64_t>> present, running;  // (i, N) the inputs hold; those being written
  bool known = true;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto sh = shards_of(files[i]);
    known = known && !sh.empty();
    present.insert(sh.begin(), sh.end());
    if (being_written(inputs[i])) {
      sum.running.push_back(inputs[i]);
      running.insert(sh.begin(), sh.end());
    }
  }
  const std::int64_t N = present.empty() ? 0 : present.begin()->second;
  known = known && std::all_of(present.begin(), present.end(), [&](const auto& s) { return s.second == N; });
  std::string merged_shards;
  for (const auto& [i, n] : present) merged_shards += fmt::format("{}{}/{}", merged_shards.empty() ? "" : ",", i, n);
  if (known) {
    std::set<std::int64_t> absent, short_of;
    for (const std::int64_t p : sum.missing) (present.count({p % N, N}) ? short_of : absent).insert(p % N);
    for (const std::int64_t i : absent) sum.missing_shards.push_back(fmt::format("{}/{}", i, N));
    for (const std::int64_t i : short_of)
      (running.count({i, N}) ? sum.running_shards : sum.incomplete_shards).push_back(fmt::format("{}/{}", i, N));
  }
  h5::Table all = tables[0];
  for (auto& c : all.columns) c.strings.clear(), c.ints.clear(), c.floats.clear();
  for (const Entry& e : entries) copy_row(all, tables[e.file], e.row);

  const std::string tmp = merge_temp_path(out);
  try {
    h5::File o(tmp, "w");
    // Room for the merged file, claimed before anything is copied into it: HDF5 1.10's object copy (H5Ocopy)
    // crashed (a segfault: no message, the lock and the temporary left) when a write failed on a full disk.
    // The copies then write into blocks already allocated. The merged file is no larger than the inputs
    // together (each holds the groups it gives, its own points table and metadata).
    std::uintmax_t need = 0;
    for (const auto& in : inputs) need += fs::file_size(in);
    reserve_room(tmp, need, fmt::format("merge: '{}' (written as '{}' first)", out, tmp));
    o.copy_attrs_from(files[0], "/", "/");  // the settings every input shares (argv: the first input's run)
    o.set_attr("/", "shard", known ? merged_shards : std::string());
    o.set_attr("/", "created_utc", utc_now());
    // The merged sweep began when its earliest input began (a --resume of the merged file compares traces with it).
    std::time_t began = -1;
    for (const auto& f : files)
      for (const char* name : {"started_utc", "created_utc"})
        if (f.has_attr("/", name)) {
          const std::time_t t = parse_utc(f.attr_text("/", name));
          if (t >= 0) {
            if (began < 0 || t < began) began = t;
            break;
          }
        }
    if (began >= 0) o.set_attr("/", "started_utc", format_utc(began));
    // Each input as it was written: path, shard, host, time and command line.
    std::string from;
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto attr = [&](const char* name) {
        return files[i].has_attr("/", name) ? files[i].attr_text("/", name) : std::string("?");
      };
      from += fmt::format("{}{} (shard {}, git revision {}, host {}, written {}, argv: {})", i ? "\n" : "", inputs[i],
                          attr("shard"), attr("git_revision"), attr("host"), attr("created_utc"), attr("argv"));
      if (files[i].has_attr("/", "resumed_by")) {  // the runs that resumed it, indented below it
        std::istringstream lines(files[i].attr_text("/", "resumed_by"));
        for (std::string line; std::getline(lines, line);) from += "\n  resumed " + line;
      }
      if (files[i].has_attr("/", "merged_from")) {  // a merged input: its own inputs, indented below it
        std::istringstream lines(files[i].attr_text("/", "merged_from"));
        for (std::string line; std::getline(lines, line);) from += "\n  " + line;
      }
    }
    o.remove_attr("/", "resumed_by");  // the first input's, copied with its attributes: merged_from has each input's
    o.set_attr("/", "merged_from", from);
    o.write_table("points", all, kChunkRows);
    for (const Entry& e : entries) {
      const std::string g = group_name(e.index);
      IP_REQUIRE(files[e.file].is_group(g), "merge: '{}' has no group '{}' for its point {}", inputs[e.file], g,
                 e.index);
      o.copy_from(files[e.file], g, g);
    }
    o.close();
    release_unused_room(tmp);
    sync_path(tmp, false);
    IP_REQUIRE(::link(tmp.c_str(), out.c_str()) == 0, "merge: cannot create '{}': {}", out, std::strerror(errno));
    ::unlink(tmp.c_str());
    sync_path(folder_of(out), true);
  } catch (const std::exception&) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  return sum;
}

}  // namespace ip::exp
