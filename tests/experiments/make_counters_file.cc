// Writes a results file like the one scripts/gpu-profile-check.sh makes on a GPU (1Mi tokens, D = 128, fp32
// keys, G = 4; points fp32 and fp16, one index build each), with pool-stage DRAM counters set to FACTOR x
// the declared bytes, for scripts/pool_dram_check.sh (tests experiments.PoolDramCheck.*).
// Usage: make_counters_file OUT.h5 FACTOR [--no-counters]   (an existing OUT is replaced)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "experiments/results.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string(argv[3]) != "--no-counters")) {
    std::fprintf(stderr, "usage: %s OUT.h5 FACTOR [--no-counters]\n", argv[0]);
    return 2;
  }
  const double factor = std::atof(argv[2]);
  const bool counters = argc == 3;
  try {
    ip::exp::SweepMeta meta;
    meta.sweep_id = "pool-dram-check";
    meta.tool_version = "test";
    meta.config_text = "[pool]\nprecision = fp32, fp16\n";
    meta.axis_keys = {"pool.precision"};
    meta.points_total = 2;
    ip::exp::ResultsFile file(argv[1], meta, false, true);
    const double tokens = 1 << 20, keys = tokens * 128 * 4;
    const char* precision[] = {"fp32", "fp16"};
    const double index_per_token[] = {128.0, 64.0};  // D x bytes / G
    for (int i = 0; i < 2; ++i) {
      ip::exp::PointRecord rec;
      rec.index = i;
      rec.key = std::string("pool.precision=") + precision[i];
      rec.axes = {{"pool.precision", precision[i]}};
      rec.summary.tokens = tokens;
      rec.summary.index_bytes_per_token = index_per_token[i];
      rec.summary.backend = "cuda";
      if (counters) {
        rec.profile.counters_status = "ok";
        rec.profile.chip = "GH100";
        rec.profile.passes = 2;
        const double index = index_per_token[i] * tokens;  // written by the kernel, read back by the download
        rec.profile.counters = {{"pool", "dram__bytes_read.sum", factor * (keys + index), "byte", 1, "sum"},
                                {"pool", "dram__bytes_write.sum", factor * index, "byte", 1, "sum"},
                                {"pool", "lts__t_sector_hit_rate.pct", 3.5, "percent", 1, "mean"},
                                {"score", "dram__bytes_read.sum", 1e6, "byte", 1, "sum"}};
      } else {
        rec.profile.counters_status = "unavailable";
        rec.profile.counters_reason = "no CUDA device";
      }
      ip::exp::RequestDetail d;
      d.steps.resize(1);
      rec.requests.push_back(d);
      file.append(rec);
    }
  } catch (const ip::Error& e) {
    std::fprintf(stderr, "make_counters_file: %s\n", e.what());
    return 1;
  }
  return 0;
}
