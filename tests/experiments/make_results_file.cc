// Writes a 3-point results file with ResultsFile, for read_with_h5py.py (which hard-codes these values).
// Usage: make_results_file OUT.h5   (an existing OUT is replaced)
#include <cstdio>

#include "core/error.h"
#include "experiments/results.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    ip::exp::SweepMeta meta;
    meta.sweep_id = "h5py-check";
    meta.tool_version = "test";
    meta.config_text = "[pool]\nweighting = mean, max\n";
    meta.axis_keys = {"pool.weighting", "topk.tokens"};
    meta.points_total = 3;
    ip::exp::ResultsFile file(argv[1], meta, false, true);
    const char* weighting[] = {"mean", "max", "mean"};
    const char* topk[] = {"512", "512", "2048"};
    for (int i = 0; i < 3; ++i) {
      ip::exp::PointRecord rec;
      rec.index = i;
      rec.key = std::string("pool.weighting=") + weighting[i] + ";topk.tokens=" + topk[i];
      rec.axes = {{"pool.weighting", weighting[i]}, {"topk.tokens", topk[i]}};
      rec.summary.tokens = 4096;
      rec.summary.index_bytes_per_token = 16.0 * (i + 1);  // 16, 32, 48
      rec.summary.token_recall = 0.5 + 0.25 * i;           // 0.5, 0.75, 1.0
      rec.summary.wall_s = 1.5;
      if (i == 2) {
        rec.summary.status = "skipped";
        rec.summary.reason = "k exceeds the context";
      } else {
        ip::exp::RequestDetail d;
        d.steps.resize(4);
        rec.requests.push_back(d);
      }
      file.append(rec);
    }
  } catch (const ip::Error& e) {
    std::fprintf(stderr, "make_results_file: %s\n", e.what());
    return 1;
  }
  return 0;
}
