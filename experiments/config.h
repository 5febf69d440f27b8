// The run configuration: plain structs with their defaults, the table of config keys, and a minimal
// INI reader with sweep axes (comma-separated values form a grid). Nothing below experiments/ sees
// config-file types: a Point holds only core structs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/pipeline.h"
#include "core/workload.h"

namespace ip::exp {

// Everything one sweep point needs. Defaults are the ones in the key table (config.cc).
struct Point {
  std::string backend = "cpu";  // cpu | cuda | auto
  int threads = 0;              // CPU threads, 0 = all
  std::string source = "synthetic";
  WorkloadSpec workload;
  PipelineParams pipeline;
  std::string output_path;  // results CSV ("" = none)
  // The axis values of this point, "key=value", in axis order (for labels).
  std::vector<std::pair<std::string, std::string>> axes;
};

// One config key: its canonical name ("section.key", or "key" for top-level keys), default, help.
struct KeyInfo {
  std::string name;
  std::string default_value;
  std::string help;
  std::function<void(Point&, const std::string&)> apply;  // throws ip::Error on a bad value
};
const std::vector<KeyInfo>& config_keys();

// A value as written, with where it came from.
struct Setting {
  std::string key;
  std::vector<std::string> values;  // more than one: a sweep axis
  std::string file;
  int line = 0;  // 0: command line
};

struct Sweep {
  std::string config_path;
  std::string config_text;
  std::vector<Setting> settings;  // in file order
  std::vector<Point> points;      // the grid, in a deterministic order (last axis fastest)
};

// Reads the file, applies `overrides` ("key=v1,v2" from the command line) and expands the grid.
// Throws ip::Error naming the file, line and key on any bad input, before anything runs.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides = {});

// "--help-config" text: every key with its default and help.
std::string describe_keys();

}  // namespace ip::exp
