#include "experiments/import.h"

#include "experiments/h5.h"

namespace ip::exp {
namespace {

Tensor<float> read_checked(const h5::File& f, const std::string& name, std::size_t rank) {
  const h5::DatasetInfo di = f.info(name);
  IP_REQUIRE(di.is_float, "{}: dataset '{}' must be floating point (float32), it is not", f.path(), name);
  IP_REQUIRE(di.shape.size() == rank, "{}: dataset '{}' must have rank {}, has rank {}", f.path(), name, rank,
             di.shape.size());
  return f.read_float(name);
}

}  // namespace

Workload import_workload(const std::string& path) {
  const h5::File f(path, "r");
  Workload w;
  for (const char* name : {"index_keys", "index_queries", "head_weights"})
    IP_REQUIRE(f.exists(name), "{}: missing dataset '{}' (needs index_keys, index_queries, head_weights)", path, name);
  w.index_keys = read_checked(f, "index_keys", 2);
  w.index_queries = read_checked(f, "index_queries", 3);
  w.head_weights = read_checked(f, "head_weights", 2);
  const int present = f.exists("attn_keys") + f.exists("attn_queries") + f.exists("values");
  IP_REQUIRE(present == 0 || present == 3, "{}: attn_keys, attn_queries and values must come together ({} of 3 present)",
             path, present);
  if (present == 3) {
    w.attn_keys = read_checked(f, "attn_keys", 2);
    w.values = read_checked(f, "values", 2);
    const h5::DatasetInfo qi = f.info("attn_queries");
    IP_REQUIRE(qi.shape.size() == 2 || qi.shape.size() == 3, "{}: dataset 'attn_queries' must have rank 2 or 3", path);
    w.attn_queries = f.read_float("attn_queries");
    if (qi.shape.size() == 2) w.attn_queries.reshape({qi.shape[0], 1, qi.shape[1]});
  }
  validate_workload(w, path);
  return w;
}

}  // namespace ip::exp
