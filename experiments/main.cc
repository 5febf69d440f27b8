// indexpool: the command-line entry point. Subcommands grow here (run today; list, merge, cache-sim,
// inspect with the runner and the cache simulator).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/error.h"
#include "experiments/config.h"
#include "experiments/runner.h"

namespace po = boost::program_options;
using namespace ip::exp;

namespace {

constexpr const char* kUsage =
    "usage: indexpool [--version] [--help] <command> [<args>]\n"
    "\n"
    "IndexPool: a research simulator for index compression in sparse attention.\n"
    "\n"
    "commands:\n"
    "  run CONFIG     run the sweep a config file describes and print a summary table\n"
    "\n"
    "'indexpool <command> --help' describes a command; 'indexpool run --help-config' lists every config key.\n";

// Fails before any work when the results file cannot be written; writes nothing.
void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  IP_REQUIRE(!ec, "output.path '{}': cannot create its folder: {}", path, ec.message());
  IP_REQUIRE(!fs::is_directory(p), "output.path '{}' is a folder, not a file", path);
  const fs::path probe = p.string() + ".tmp";
  {
    std::ofstream f(probe, std::ios::app);
    IP_REQUIRE(f.good(), "output.path '{}' is not writable", path);
  }
  fs::remove(probe, ec);
}

int cmd_run(const std::vector<std::string>& args, const std::string& argv_line) {
  po::options_description opts("indexpool run CONFIG [options]");
  // clang-format off
  opts.add_options()
    ("help,h", "describe this command")
    ("help-config", "list every config key with its default and meaning")
    ("set", po::value<std::vector<std::string>>()->composing(),
     "override or add a key: --set pool.weighting=uniform,tfidf (a list is a sweep axis)")
    ("quiet,q", "no progress lines")
    ("config", po::value<std::string>(), "the config file (INI)");
  // clang-format on
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << "Runs every point of the sweep in CONFIG on the CPU backend and prints one row per point:\n"
                 "index bytes per token, compression ratio, scoring multiply-adds, recall against the exact\n"
                 "indexer, attention fidelity, stage times. With output.path set, also writes a CSV.\n\n"
              << opts << "\nexample: indexpool run configs/quickstart.ini --set pool.group_size=2,4,8\n";
    return 0;
  }
  if (vm.count("help-config")) {
    std::cout << describe_keys();
    return 0;
  }
  IP_REQUIRE(vm.count("config"), "run: missing CONFIG (try 'indexpool run --help')");
  const std::vector<std::string> sets = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const Sweep sweep = load_sweep(vm["config"].as<std::string>(), sets);
  const std::string out_path = sweep.points.empty() ? "" : sweep.points.front().output_path;
  for (const auto& p : sweep.points)
    IP_REQUIRE(p.output_path == out_path, "output.path cannot be a sweep axis");
  if (!out_path.empty()) check_writable(out_path);

  RunOptions ro;
  ro.quiet = vm.count("quiet") > 0;
  if (!ro.quiet)
    std::fprintf(stderr, "%s\n%zu points from %s\n", version_string().c_str(), sweep.points.size(),
                 sweep.config_path.c_str());
  WorkloadCache cache;
  preload_imports(sweep, cache);  // a bad import file fails here, before any point runs
  const auto rows = run_sweep(sweep, ro, cache);
  std::cout << summary_table(sweep, rows);
  if (!out_path.empty()) {
    write_csv(out_path, sweep, rows, argv_line);
    std::cout << "results: " << out_path << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string argv_line;
  for (int i = 0; i < argc; ++i) {
    if (i) argv_line += ' ';
    argv_line += argv[i];
  }
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (cmd == "--version" || cmd == "version") {
      std::cout << version_string() << "\n" << "devices: " << devices_string() << "\n";
      return 0;
    }
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << kUsage;
      return 0;
    }
    if (cmd == "run") return cmd_run(rest, argv_line);
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
