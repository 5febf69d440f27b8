// indexpool: the command-line entry point. Subcommands grow here (run today; list, merge, cache-sim,
// inspect with the runner and the cache simulator).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/provenance.h"
#include "experiments/batched_run.h"
#include "experiments/cache_sim_cmd.h"
#include "experiments/config.h"
#include "experiments/device_plan.h"
#include "experiments/profiling.h"
#include "experiments/results.h"
#include "experiments/runner.h"
#include "indexpool/build_config.h"
#include "indexpool/git_revision.h"

namespace po = boost::program_options;
using namespace ip::exp;

namespace {

// The signals that stop `run`:
// - SIGINT (Ctrl-C): the runner stops after the point under way (it then writes every finished point and
//   returns); a second SIGINT, SIGTERM or SIGHUP stops at once: it removes the results file's lock file and
//   its temporary (while this process holds the lock), says so, and the process dies by that signal.
// - SIGTERM (a batch system's time limit or preemption, `timeout`, `docker stop`) and SIGHUP (a closed
//   terminal; left alone when it is ignored, as under nohup): the same, but the point under way has
//   INDEXPOOL_STOP_GRACE seconds (default 20) to finish: then StopDeadline abandons it. Slurm sends SIGKILL 30 s
//   (KillWait) after SIGTERM, and a point can run for minutes.
// - SIGUSR1, SIGUSR2 (an early warning, e.g. `sbatch --signal=B:USR1@600`): stop after the point under way,
//   with no deadline; they do not count as a first signal, so a SIGTERM after them starts the grace period.
// Only async-signal-safe calls (write, unlink, sigaction, raise, sem_post) and sig_atomic_t flags; the handler
// never nests (every stop signal is blocked while it runs).
volatile std::sig_atomic_t g_stop = 0;     // the signal that stops the sweep (the latest counted one)
volatile std::sig_atomic_t g_signals = 0;  // SIGINT, SIGTERM and SIGHUP received
char g_lock_path[4096] = {0};             // `<output.path>.lock`, set before g_lock_armed
char g_results_tmp[4096] = {0};           // `<output.path>.tmp-<pid>`, the results file's temporary
volatile std::sig_atomic_t g_lock_armed = 0;  // 1 while this process holds that lock
sem_t g_deadline_wake;                        // posted by the first SIGTERM or SIGHUP (StopDeadline waits)
volatile std::sig_atomic_t g_deadline_armed = 0;
char g_grace_msg[512] = {0};  // the first SIGTERM's or SIGHUP's line, with the grace period

void say(const char* msg, std::size_t n) {
  const ssize_t r = ::write(STDERR_FILENO, msg, n);
  (void)r;
}

// From a handler: the default action for `sig`, then `sig` raised (blocked until the handler returns, then
// the process dies by it). Async-signal-safe.
void die_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a signal";
  }
}

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGUSR1 || sig == SIGUSR2) {
    if (g_stop) return;  // already stopping
    g_stop = sig;
    static const char msg[] =
        "\nindexpool: stopping after the current point, with no deadline (a user signal, SIGUSR1 or SIGUSR2; "
        "finished points are kept, --resume runs the rest)\n";
    say(msg, sizeof msg - 1);
    return;
  }
  g_signals = g_signals + 1;
  if (g_signals == 1) {
    g_stop = sig;
    if (sig != SIGINT && g_deadline_armed) {
      say(g_grace_msg, std::strlen(g_grace_msg));
      sem_post(&g_deadline_wake);
      return;
    }
    static const char msg[] =
        "\nindexpool: stopping after the current point (finished points are kept; --resume runs the rest); "
        "a second Ctrl-C or SIGTERM stops at once\n";
    say(msg, sizeof msg - 1);
    return;
  }
  if (g_lock_armed) {  // the flock itself dies with the process
    ::unlink(g_lock_path);
    ::unlink(g_results_tmp);  // a write under way (ResultsFile writes a temporary, then renames it)
  }
  static const char msg[] =
      "\nindexpool: stopped at once by a second signal; the results file keeps the points written before (any "
      "finished since its last write are lost), --resume runs the rest\n";
  say(msg, sizeof msg - 1);
  die_by(sig);
}

void install_stop_handlers(double grace_s) {
  std::snprintf(g_grace_msg, sizeof g_grace_msg,
                "\nindexpool: stopping after the current point, or without it in %g s (INDEXPOOL_STOP_GRACE); "
                "finished points are kept, --resume runs the rest; a second signal stops at once\n",
                grace_s);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ip::exp::block_stop_signals(&sa.sa_mask);  // the handler never nests
  sa.sa_flags = SA_RESTART;  // a write or fsync under way goes on
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Ignored ones stay ignored: SIGHUP under nohup, and whatever the parent chose for the user signals.
  for (int sig : {SIGHUP, SIGUSR1, SIGUSR2}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
  }
}

// The grace period after the first SIGTERM or SIGHUP: a thread of its own waits for it (woken by the
// handler); when the point under way has not finished by then, it writes the finished points the results file
// holds (waiting for a write under way: RunOptions::out_mutex), says so, removes the lock file and ends the
// process with status 128 + the signal, without the point. Made before the sweep's loop, destroyed after it.
class StopDeadline {
 public:
  StopDeadline(ResultsFile* out, std::mutex* out_mutex, double grace_s, std::size_t points)
      : out_(out), out_mutex_(out_mutex), grace_s_(grace_s), points_(points) {
    sigset_t block, old;
    ip::exp::block_stop_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    thread_ = std::thread([this] { loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    g_deadline_armed = 1;
  }
  ~StopDeadline() {
    g_deadline_armed = 0;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
    sem_post(&g_deadline_wake);
    thread_.join();
  }
  StopDeadline(const StopDeadline&) = delete;
  StopDeadline& operator=(const StopDeadline&) = delete;

 private:
  void loop() {
    while (sem_wait(&g_deadline_wake) != 0 && errno == EINTR) {
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(grace_s_), [this] { return finished_; })) return;
    const std::lock_guard<std::mutex> out_lock(*out_mutex_);  // a write under way ends first
    const int sig = g_stop;
    std::string written;
    if (out_) {
      try {
        out_->flush();
        written = fmt::format("; the results file holds the {} finished points of {}, --resume runs the rest",
                              out_->size(), points_);
      } catch (const std::exception& e) {
        written = fmt::format("; writing the finished points failed: {}", e.what());
      }
    }
    std::fprintf(stderr, "\nindexpool: the point under way did not finish within %g s of %s (INDEXPOOL_STOP_GRACE): "
                 "stopped without it%s\n", grace_s_, signal_name(sig), written.c_str());
    std::fflush(stderr);
    if (g_lock_armed) ::unlink(g_lock_path);
    std::_Exit(128 + sig);
  }

  ResultsFile* out_;
  std::mutex* out_mutex_;
  double grace_s_;
  std::size_t points_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread thread_;
};

// SIGINT / SIGTERM / SIGHUP (unless ignored) during `merge`: OUT is not written yet (it appears only by the
// final link), so the merge stops at once; the handler removes the temporary file it was writing
// (`OUT.tmp-<pid>`, this process's own name), says so, and the process dies by the signal. A merge killed by
// SIGKILL leaves the file; the next merge to OUT removes it.
char g_merge_tmp[4096] = {0};

extern "C" void on_merge_signal(int sig) {
  if (g_merge_tmp[0]) ::unlink(g_merge_tmp);
  static const char msg[] = "\nindexpool merge: stopped by a signal, its temporary file removed (the output file appears only when "
      "a merge completes)\n";
  say(msg, sizeof msg - 1);
  die_by(sig);
}

void install_merge_handlers(const std::string& out) {
  const std::string tmp = ip::exp::merge_temp_path(out);
  if (tmp.size() < sizeof g_merge_tmp) {  // too long to keep: the next merge to OUT removes the file
    std::copy(tmp.begin(), tmp.end(), g_merge_tmp);
    g_merge_tmp[tmp.size()] = '\0';
  }
  struct sigaction sa {};
  sa.sa_handler = on_merge_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGHUP);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction old {};
  if (sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, nullptr);
}

// Arms the second-signal handler's removal of `<path>.lock` for the life of this object (declare it after
// the ResultsFile that holds the lock, so it disarms before the lock is released).
struct LockFileForSignals {
  explicit LockFileForSignals(const std::string& results_path) {
    const std::string lock = results_path + ".lock", tmp = fmt::format("{}.tmp-{}", results_path, ::getpid());
    // Too long to keep: the stale lock file is harmless (flock), and the next run removes the temporary.
    if (lock.size() >= sizeof g_lock_path || tmp.size() >= sizeof g_results_tmp) return;
    std::copy(lock.begin(), lock.end(), g_lock_path);
    g_lock_path[lock.size()] = '\0';
    std::copy(tmp.begin(), tmp.end(), g_results_tmp);
    g_results_tmp[tmp.size()] = '\0';
    g_lock_armed = 1;
  }
  ~LockFileForSignals() { g_lock_armed = 0; }
  LockFileForSignals(const LockFileForSignals&) = delete;
  LockFileForSignals& operator=(const LockFileForSignals&) = delete;
};

constexpr const char* kUsage =
    "usage: indexpool [--version] [--help] <command> [<args>]\n"
    "\n"
    "IndexPool: a research simulator for index compression in sparse attention.\n"
    "\n"
    "commands:\n"
    "  run CONFIG       run the sweep a config file describes, write its results file, print a summary\n"
    "  list CONFIG      print the points a run would execute, without running them\n"
    "  merge OUT IN...  join the results files of a sweep's shards\n"
    "  inspect FILE     describe a results file\n"
    "  cache-sim        replay a trace file through a cache hierarchy (--help for the options)\n"
    "\n"
    "'indexpool <command> --help' (or 'indexpool help <command>') describes a command; 'indexpool run\n"
    "--help-config' lists every config key.\n";

// Fails before any work when the results file cannot be written; writes nothing.
void check_writable(const std::string& path, bool resume) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  IP_REQUIRE(!ec, "output.path '{}': cannot create its folder: {}", path, ec.message());
  IP_REQUIRE(!fs::is_directory(p), "output.path '{}' is a folder, not a file", path);
  require_writable_beside("output.path", path);
  // Points are written by copying the results file beside it and renaming the copy over it: a resumed file
  // needs its own size free again, a new one some room, or the first point's work is lost when it is written.
  const std::uintmax_t held = resume && fs::is_regular_file(p, ec) ? fs::file_size(p, ec) : 0;
  const double need = static_cast<double>(held) + 256.0 * 1024;
  struct statvfs v {};
  // (A file system that reports no blocks at all, as some FUSE mounts do, says nothing of its space.)
  if (::statvfs(p.has_parent_path() ? p.parent_path().c_str() : ".", &v) == 0 && v.f_blocks > 0) {
    const double free = static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize);
    IP_REQUIRE(free >= need,
               "output.path '{}': its disk has {} free, and writing the first point needs at least {} ({}); free "
               "some space or write elsewhere",
               path, format_bytes(free), format_bytes(need),
               held ? fmt::format("a copy of the {} results file beside it, and the point", format_bytes(held))
                    : std::string("the new results file"));
  }
}

// The files a run writes (output.path, each point's output.cache_trace) must not be files it reads: the
// config and imported workloads (workload.source). --overwrite would replace them. Fails before any work.
void check_outputs_are_not_inputs(const Sweep& sweep, const std::vector<Point>& points) {
  namespace fs = std::filesystem;
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
  };
  std::set<std::pair<std::string, std::string>> inputs, outputs;  // (what, path), (key, path)
  if (!sweep.config_path.empty()) inputs.emplace("the config file", sweep.config_path);
  for (const auto& p : points) {
    if (p.source != "synthetic") inputs.emplace("the imported workload (workload.source)", p.source);
    if (!p.output_path.empty()) outputs.emplace("output.path", p.output_path);
    if (!p.cache_trace.empty()) outputs.emplace("output.cache_trace", cache_trace_path(p));
  }
  for (const auto& [key, out] : outputs)
    for (const auto& [what, in] : inputs)
      IP_REQUIRE(!same(out, in), "{} '{}' is {} of this run ('{}'): writing there would destroy it; give {} another "
                 "name", key, out, what, in, key);
}

struct SweepArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string shard;
};

void add_sweep_options(po::options_description& opts) {
  // clang-format off
  opts.add_options()
    ("set", po::value<std::vector<std::string>>()->composing(),
     "override or add a key: --set pool.weighting=uniform,tfidf (a list is a sweep axis)")
    ("shard", po::value<std::string>(),
     "run shard i of N (i/N, 0 <= i < N; point p belongs to shard p mod N); default: Slurm's "
     "SLURM_ARRAY_TASK_ID/_COUNT/_MIN/_STEP when set, else 0/1")
    ("config", po::value<std::string>(), "the config file (INI)");
  // clang-format on
}

Sweep load_from(const po::variables_map& vm) {
  IP_REQUIRE(vm.count("config"), "missing CONFIG (try --help)");
  const std::vector<std::string> sets =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  Sweep sweep = load_sweep(vm["config"].as<std::string>(), sets);
  IP_REQUIRE(sweep.import_errors.empty(),
             "workload.source: {} (the sweep id covers every file the sweep imports, those of other shards' points "
             "too)",
             sweep.import_errors.empty() ? std::string() : sweep.import_errors.front());
  return sweep;
}

std::pair<int, int> shard_of(const po::variables_map& vm) {
  return parse_shard(vm.count("shard") ? vm["shard"].as<std::string>() : "");
}

po::variables_map parse(const std::vector<std::string>& args, const po::options_description& opts) {
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

int cmd_run(const std::vector<std::string>& args, const std::string& argv_line) {
  po::options_description opts("indexpool run CONFIG [options]");
  // clang-format off
  opts.add_options()
    ("help,h", "describe this command")
    ("help-config", "list every config key with its default and meaning")
    ("resume", "run only the points the results file does not hold yet, and again those it recorded as skipped "
               "for want of a device or memory")
    ("overwrite", "replace an existing results file (after the first point finishes)")
    ("profile", "for Nsight: the sweep inside cudaProfilerStart/Stop, in-process CUPTI off (README: Profiling; every "
                "run times each point once, with no warm-up loop)")
    ("quiet,q", "no progress lines");
  // clang-format on
  add_sweep_options(opts);
  const auto vm = parse(args, opts);
  if (vm.count("help")) {
    std::cout << "Runs every point of the sweep in CONFIG on its backend (backend = cpu | cuda | auto) and prints\n"
                 "one row per point: index bytes per token, compression ratio, scoring multiply-adds, recall\n"
                 "against the exact indexer, attention fidelity, stage times. With output.path set, finished points\n"
                 "are written to that HDF5 file as they finish (held briefly when rewriting a large file would\n"
                 "dominate; the end of the run writes all). The first Ctrl-C stops the sweep after the point\n"
                 "under way, with every finished point written (exit status 130); SIGTERM and SIGHUP the same,\n"
                 "but a point still running INDEXPOOL_STOP_GRACE seconds later (default 20) is abandoned (exit\n"
                 "status 128 + the signal); SIGUSR1/SIGUSR2 stop after the point under way with no deadline. A\n"
                 "second Ctrl-C, SIGTERM or SIGHUP stops at once (removing the lock file); --resume continues a\n"
                 "stopped or killed run. A point that\n"
                 "cannot run (no CUDA build or device for backend = cuda, not enough memory) is recorded as\n"
                 "skipped with its reason; the exit status is still 0 (--resume runs it again, e.g. on a machine\n"
                 "with a GPU or with a higher sweep.memory_limit). Threads: the config keys threads (0: OpenMP's\n"
                 "default, every hardware thread unless OMP_NUM_THREADS says otherwise) and threads_per_request;\n"
                 "the results, but not the stage times, are the same whatever they are. Every key, with its\n"
                 "default: --help-config.\n\n"
              << opts
              << "\nexamples:\n  indexpool run configs/quickstart.ini --set pool.group_size=2,4,8\n"
                 "  indexpool run configs/ablation_weighting.ini --shard 3/8 --set output.path=results/abl_3.h5\n";
    return 0;
  }
  if (vm.count("help-config")) {
    std::cout << describe_keys();
    return 0;
  }
  const Sweep sweep = load_from(vm);
  const auto [shard, shards] = shard_of(vm);
  std::vector<Point> points = shard_points(sweep, shard, shards);
  const std::string out_path = sweep.points.empty() ? "" : sweep.points.front().output_path;
  IP_REQUIRE(!(vm.count("resume") && vm.count("overwrite")), "--resume and --overwrite exclude each other");
  IP_REQUIRE(!vm.count("resume") || !out_path.empty(), "--resume needs output.path");
  RunOptions ro;
  ro.progress_interval_s = progress_interval_from_env();
  const double stop_grace_s = stop_grace_from_env();

  // Everything that can fail on bad input happens before the first point: metric names, imports, the
  // output file.
  // The metric names first: a config checked with --profile (counters off) must not fail later without it.
  const std::string metrics_note = validate_profiling(sweep, points);
  const std::string profile_note = vm.count("profile") ? apply_profile_mode(points) : "";
  WorkloadCache cache;
  preload_imports(points, cache);
  check_outputs_are_not_inputs(sweep, points);
  if (points.empty()) {  // a shard of a sweep with fewer points than shards (a Slurm array larger than it)
    std::cout << fmt::format("shard {}/{} has no points: the sweep has {} point{}, and shard i runs the points p with "
                             "p mod {} = i; nothing to run, no results file written{}\n",
                             shard, shards, sweep.points.size(), sweep.points.size() == 1 ? "" : "s", shards,
                             out_path.empty() ? "" : fmt::format(" ('{}' is left as it is)", out_path));
    return 0;
  }
  std::unique_ptr<ResultsFile> results;
  if (!out_path.empty()) {
    check_writable(out_path, vm.count("resume") > 0);
    SweepMeta meta;
    meta.sweep_id = sweep.sweep_id;
    meta.tool_version = version_string();
    meta.git_revision = IP_GIT_REVISION;
    meta.config_text = sweep.config_text;
    meta.sweep_settings = sweep.sweep_settings;
    meta.config_path = sweep.config_path;
    meta.argv = argv_line;
    meta.host = host_name();
    // The backend the config asks for; when it is a sweep axis, each value, in sweep order (what each point ran
    // on is its run_backend column).
    for (const auto& p : points)
      if (("," + meta.backend + ",").find("," + p.backend + ",") == std::string::npos)
        meta.backend += (meta.backend.empty() ? "" : ",") + p.backend;
    if (meta.backend.empty()) meta.backend = "cpu";
    meta.device = fmt::format("CPU: {}; CUDA: {}", cpu_description(), devices_string());
    meta.axis_keys = sweep.axis_keys;
    meta.points_total = static_cast<std::int64_t>(sweep.points.size());
    meta.shard = fmt::format("{}/{}", shard, shards);
    meta.imports = sweep.imports;
    meta.started_utc = ip::utc_now();
    results = std::make_unique<ResultsFile>(out_path, meta, vm.count("resume") > 0, vm.count("overwrite") > 0);
    results->set_flush_policy(ResultsFile::FlushPolicy::kBoundedOverhead);
  }
  // After the results file is open: a resumed file says which points will run, and when its sweep began.
  check_cache_traces(points, vm.count("overwrite") > 0, vm.count("resume") > 0, results.get());
  std::optional<LockFileForSignals> lock_for_signals;  // after `results`: disarmed before its lock goes
  if (results) lock_for_signals.emplace(out_path);

  ro.quiet = vm.count("quiet") > 0;
  ro.profile = vm.count("profile") > 0;
  if (!ro.quiet) std::fprintf(stderr, "%s%s", profile_note.c_str(), metrics_note.c_str());
  if (!ro.quiet)
    std::fprintf(stderr, "%s\n%zu points from %s%s\n", version_string().c_str(), points.size(),
                 sweep.config_path.c_str(), shards > 1 ? fmt::format(" (shard {}/{})", shard, shards).c_str() : "");
  ro.stop = &g_stop;
  std::mutex out_mutex;
  ro.out_mutex = &out_mutex;
  sem_init(&g_deadline_wake, 0, 0);
  std::vector<PointRecord> rows;
  {
    StopDeadline deadline(results.get(), &out_mutex, stop_grace_s, points.size());  // armed before the handlers
    install_stop_handlers(stop_grace_s);
    rows = run_points(sweep, points, ro, cache, results.get());
  }
  std::cout << summary_table(sweep.axis_keys, rows);
  if (results) std::cout << "results: " << out_path << " (" << results->size() << " points)\n";
  // The signal came during the last point, which the loop let finish (it stops only between points): nothing
  // is missing.
  const bool complete = results ? results->size() == points.size() : rows.size() == points.size();
  if (g_stop && complete) {
    std::fprintf(stderr, "indexpool: %s came during the sweep's last point, which finished: the sweep is complete\n",
                 signal_name(g_stop));
    return 0;
  }
  if (g_stop) {
    std::fprintf(stderr, "indexpool: stopped by %s after %zu of %zu points%s\n", signal_name(g_stop),
                 results ? results->size() : rows.size(), points.size(),  // with --resume: the file's earlier ones too
                 results ? "; the finished points are in the results file, --resume runs the rest" : "");
    return 128 + g_stop;
  }
  return 0;
}

// What a cuda or auto point needs on the device (the estimate the runner checks against free memory):
// the batched decoder's for all B requests with select.batched, else one request's.
std::string device_note(const Point& p) {
  try {
    if (p.batched) {
      if (p.workload.attn_dim <= 0)  // an import without attention arrays (config validation refuses generated ones)
        return p.backend == "cuda" ? " (will be skipped: select.batched: the workload has no attention stage, which the "
                                     "batched decoder needs)"
                                   : "; select.batched: the workload has no attention stage, which the batched decoder "
                                     "needs (backend = auto: runs on the cpu)";
      const double b = batched_device_bytes(p.workload, p.pipeline);
      return std::isnan(b) ? std::string() : fmt::format("; device ~{} for the batch", format_bytes(b));
    }
    const double r = estimate_device_bytes(device_shape(p.workload), p.pipeline).total();
    return fmt::format("; device ~{} per request", format_bytes(r));
  } catch (const ip::Error& e) {
    return fmt::format("; device estimate refused: {}", e.what());
  }
}

int cmd_list(const std::vector<std::string>& args) {
  po::options_description opts("indexpool list CONFIG [options]");
  opts.add_options()("help,h", "describe this command");
  add_sweep_options(opts);
  const auto vm = parse(args, opts);
  if (vm.count("help")) {
    std::cout << "Prints the exact points a run of CONFIG would execute (after --set and --shard), one per line,\n"
                 "with the host memory estimate (KiB, MiB or GiB), for backend = cuda or auto the device memory estimate (per\n"
                 "request, or for the whole batch with select.batched), and the reason for any point already known\n"
                 "to be skipped; runs nothing. An imported workload (workload.source) is read and checked as run\n"
                 "reads it: a file run would refuse is refused, and its sizes give the estimates and skips.\n\n"
              << opts;
    return 0;
  }
  const Sweep sweep = load_from(vm);
  const auto [shard, shards] = shard_of(vm);
  const auto points = shard_points(sweep, shard, shards);
  // Imported workloads are read and checked as a run reads them (a file run would refuse, list refuses), one
  // file at a time, each dropped once its shape is known; their shapes, not the generator's defaults, give the
  // estimates and the skips.
  std::map<std::string, ImportShape> shapes;
  for (const auto& p : points) {
    if (p.source == "synthetic" || shapes.count(p.source)) continue;
    std::vector<Point> same;
    std::copy_if(points.begin(), points.end(), std::back_inserter(same),
                 [&](const Point& q) { return q.source == p.source; });
    WorkloadCache one;
    preload_imports(same, one);
    shapes[p.source] = import_shape(one.begin()->second.requests.front());
  }
  std::cout << fmt::format("# {} of {} points (shard {}/{}), sweep id {}\n", points.size(), sweep.points.size(), shard,
                           shards, sweep.sweep_id);
  std::cout << fmt::format("# sweep.memory_limit = {}{}\n", format_bytes(sweep.memory_limit),
                           sweep.memory_limit_source.empty() ? "" : " (" + sweep.memory_limit_source + ")");
  double references = 0;
  for (const auto& listed : points) {
    const Point p = listed.source == "synthetic" ? listed : sized_point(listed, shapes.at(listed.source));
    references = std::max(references, estimate_reference_bytes(p));
    const double mem = estimate_point_bytes(p);
    std::string note = fmt::format("host ~{}", format_bytes(mem));
    if (mem > sweep.memory_limit) note += " (will be skipped: over sweep.memory_limit)";
    ip::Index64 shortest = p.workload.tokens + p.workload.append_per_step;  // the shortest request at its first step
    for (int r = 0; r < p.workload.requests; ++r)
      shortest = std::min(shortest, ip::request_tokens(p.workload, r) + p.workload.append_per_step);
    const char* tokens = p.source == "synthetic" ? "workload.tokens" : "the imported context";
    if (p.pipeline.topk_tokens > shortest)
      note += p.workload.append_per_step == 0 && p.pipeline.topk_tokens > p.workload.tokens
                  ? fmt::format(" (will be skipped: select.topk_tokens > {} of {} tokens)", tokens, p.workload.tokens)
                  : fmt::format(" (will be skipped: select.topk_tokens > a request's context of {} tokens)", shortest);
    else if (p.backend != "cpu") {
      // What the GPU path cannot do whatever the device (list runs nothing, so no device's compute
      // capability is asked for): a cuda point is skipped, an auto point runs on the CPU.
      std::string cannot;
      try {
        cannot = device_cannot(device_shape(p.workload), p.pipeline, 0);
      } catch (const ip::Error& e) {
        cannot = e.what();
      }
      if (cannot.empty())
        note += device_note(p);
      else if (p.backend == "cuda")
        note += fmt::format(" (will be skipped: backend = cuda: {})", cannot);
      else
        note += fmt::format(" (backend = auto: runs on the cpu: {})", cannot);
    }
    std::cout << fmt::format("{:>6}  {}  {}\n", p.index, p.key, note);
  }
  if (references > 0)
    std::cout << fmt::format("# and on the cpu up to {} of fidelity references a workload keeps for its later "
                             "points (only while within sweep.memory_limit)\n",
                             format_bytes(references));
  return 0;
}

int cmd_merge(const std::vector<std::string>& raw) {
  // Options are refused as options (not taken for file names); a file whose name starts with '-': ./-name.
  po::options_description opts("indexpool merge OUT IN... [options]");
  opts.add_options()("help,h", "describe this command");
  po::options_description all;
  all.add(opts).add_options()("files", po::value<std::vector<std::string>>(), "OUT, then the input files");
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(raw).options(all).positional(pos).run(), vm);
  const std::vector<std::string> args = vm.count("files") ? vm["files"].as<std::vector<std::string>>()
                                                          : std::vector<std::string>{};
  if (args.empty() || vm.count("help")) {
    std::cout << "usage: indexpool merge OUT IN...\n\nJoins the results files of the shards of one sweep into OUT "
                 "(which must not exist).\nRefuses files from different sweeps or schema versions, and points that "
                 "appear twice.\nSays how many of the sweep's points OUT holds; when some are missing it still writes "
                 "OUT (exit\nstatus 0) and warns on stderr which points and shards are missing (merge again with "
                 "them later).\nOUT's attribute merged_from names each input: its path, shard, git revision, host, "
                 "time and\ncommand line (and the runs that resumed it). An input a run is still writing is merged "
                 "as it\nis then, with a warning. OUT appears only when the merge completes (Ctrl-C stops it and "
                 "removes\nits temporary file).\n\n"
              << opts;
    return vm.count("help") ? 0 : 2;
  }
  if (args.size() < 2) {  // a usage error, as with no arguments
    std::cerr << "indexpool merge: need OUT and at least one input file (usage: indexpool merge OUT IN...)\n";
    return 2;
  }
  install_merge_handlers(args[0]);
  const MergeSummary m = merge_results(args[0], std::vector<std::string>(args.begin() + 1, args.end()));
  std::cout << fmt::format("merged {} file{} into {}: {} of the sweep's {} points{}\n", args.size() - 1,
                           args.size() == 2 ? "" : "s", args[0], m.points, m.points_total,
                           m.missing.empty() ? " (complete)" : " (partial)");
  for (const std::string& in : m.running)
    std::cerr << "indexpool: warning: '" << in << "' is being written by a running indexpool (it holds '" << in
              << ".lock'): " << args[0] << " has the points it held when read\n";
  if (const std::string missing = describe_missing(m); !missing.empty())
    std::cerr << "indexpool: warning: " << args[0] << " is partial: " << missing << "\n";
  return 0;
}

int cmd_inspect(const std::vector<std::string>& args) {
  po::options_description opts("indexpool inspect FILE [options]");
  opts.add_options()("help,h", "describe this command")(
      "table", po::value<std::string>()->value_name("NAME"),
      "print table NAME (points, point_000003/counters, point_000003/kernels, point_000003/steps, ...) instead")(
      "all", "list every point group (of more than 20, the first 15 and the last 5 are listed and the rest counted)");
  po::options_description all;
  all.add(opts).add_options()("file", po::value<std::string>(), "the results file");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);  // a bad option: status 2
  const std::string usage =
      "usage: indexpool inspect FILE [--table NAME] [--all]\n\n"
      "Describes a results file: how it was made, its points and their status, the table columns, the\n"
      "per-point datasets. With --table NAME, prints that table instead, tab-separated with a header\n"
      "line; numbers exactly, tabs, newlines and backslashes in strings as \\t, \\n, \\\\.\n\n";
  if (vm.count("help")) {
    std::cout << usage << opts;
    return 0;
  }
  if (!vm.count("file")) {
    std::cerr << "indexpool: error: inspect needs FILE (try 'indexpool inspect --help')\n";
    return 2;
  }
  const std::string file = vm["file"].as<std::string>();
  std::cout << (vm.count("table") ? table_tsv(file, vm["table"].as<std::string>())
                                  : inspect_results(file, vm.count("all") > 0));
  return 0;
}

}  // namespace

static int run_main(int argc, char** argv) {
  const std::string argv_line = ip::command_line(argc, argv);  // quoted: analysis reads it with shlex.split
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  std::string cmd = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
#if defined(IP_CUEMU)
  if (cmd == "run")
    std::cerr << "indexpool-emu: backend = cuda runs the CUDA kernels on the CPU emulator (emu/): results check "
                 "the kernels' logic; its times measure the emulator, not a GPU\n";
#endif
  try {
    if (cmd == "--version" || cmd == "version") {
      char isa[512];
      std::cout << version_string() << "\n"
                << "CPU code: " << ip::isa_level(ip::kBuildIsa) << " (extensions used: "
                << ip::format_isa(ip::kBuildIsa, isa, sizeof isa) << ")\n"
                << "devices: " << devices_string() << "\n";
      return 0;
    }
    if (cmd == "--help" || cmd == "-h" || (cmd == "help" && (rest.empty() || rest.front() == "help"))) {
      std::cout << kUsage;
      return 0;
    }
    if (cmd == "help") {  // `help CMD` is `CMD --help`
      cmd = rest.front();
      rest = {"--help"};
    }
    if (cmd == "run") return cmd_run(rest, argv_line);
    if (cmd == "list") return cmd_list(rest);
    if (cmd == "merge") return cmd_merge(rest);
    if (cmd == "inspect") return cmd_inspect(rest);
    if (cmd == "cache-sim") return cmd_cache_sim(rest);
    std::cerr << "indexpool: unknown command '" << cmd << "'\n\n" << kUsage;
    return 2;
  } catch (const ip::Error& e) {
    std::cerr << "indexpool: error: " << e.what() << "\n";
    return 1;
  } catch (const po::error& e) {
    std::cerr << "indexpool: error: " << e.what() << " (try 'indexpool " << cmd << " --help')\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "indexpool: error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, and the error paths name the file and remove
  // their temporaries, as on a full disk; SIGXFSZ's default action killed the process with its lock and
  // temporary file left behind and the points it held lost.
  std::signal(SIGXFSZ, SIG_IGN);
  const int rc = run_main(argc, argv);
  // What went to standard output (inspect --table, cache-sim --json, the sweep's summary) must have arrived: a
  // full disk or /dev/full is an error, not a truncated export with exit status 0.
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    // The cause is known when the last flush failed; an earlier write's errno is gone by now.
    const int err = errno;
    std::fprintf(stderr, "indexpool: error: cannot write standard output: %s\n",
                 err != 0 ? std::strerror(err)
                          : "a write to it failed (a full disk or device), so what it holds is cut short");
    return rc != 0 ? rc : 1;
  }
  return rc;
}
