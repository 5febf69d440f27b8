// parallel_tasks: tasks run several at once, each with its share of the threads for its own parallel_for
// calls, and give the bits they give alone; the lowest task's exception is the one rethrown.
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"

namespace {

// A chunked reduction in float over n values that depend on `seed` (parallel_for's chunks, combined in
// chunk order: the same bits on any thread count).
float chunked_sum(std::int64_t n, int seed) {
  const std::int64_t chunk = 1000, chunks = (n + chunk - 1) / chunk;
  std::vector<float> part(static_cast<std::size_t>(chunks), 0.0f);
  ip::parallel_for(n, chunk, [&](std::int64_t b, std::int64_t e) {
    float s = 0.0f;
    for (std::int64_t i = b; i < e; ++i) s += 1.0f / static_cast<float>(i + seed + 1);
    part[static_cast<std::size_t>(b / chunk)] = s;
  });
  return std::accumulate(part.begin(), part.end(), 0.0f);
}

class ParallelTasks : public ::testing::Test {
 protected:
  void TearDown() override { ip::set_num_threads(0); }
};

TEST_F(ParallelTasks, TasksGiveTheBitsTheyGiveAloneWithTheirShareOfTheThreads) {
  constexpr int kTasks = 7;
  std::vector<float> alone(kTasks);
  ip::set_num_threads(1);
  for (int t = 0; t < kTasks; ++t) alone[t] = chunked_sum(20000 + 777 * t, t);
  for (int threads : {1, 2, 4}) {
    for (int per_task : {1, 2, 8}) {
      ip::set_num_threads(threads);
      std::vector<float> got(kTasks, -1.0f);
      std::vector<int> share(kTasks, 0);
      ip::parallel_tasks(kTasks, per_task, [&](std::int64_t t) {
        share[t] = ip::num_threads();
        got[t] = chunked_sum(20000 + 777 * t, static_cast<int>(t));
      });
      for (int t = 0; t < kTasks; ++t) {
        EXPECT_EQ(std::memcmp(&got[t], &alone[t], sizeof(float)), 0) << threads << " " << per_task << " " << t;
        EXPECT_EQ(share[t], std::min(per_task, threads)) << threads << " " << per_task;  // capped at the threads
      }
      EXPECT_EQ(ip::num_threads(), threads);  // the caller's count again after the tasks
    }
  }
}

TEST_F(ParallelTasks, EveryTaskRunsAndTheLowestTasksExceptionIsRethrown) {
  ip::set_num_threads(2);
  std::vector<int> ran(9, 0);
  try {
    ip::parallel_tasks(9, 1, [&](std::int64_t t) {
      ran[t] = 1;
      if (t == 3 || t == 6) throw std::runtime_error("task " + std::to_string(t));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task 3");
  }
  EXPECT_EQ(std::accumulate(ran.begin(), ran.end(), 0), 9);
  EXPECT_EQ(ip::num_threads(), 2);
}

// A parallel_for inside another's chunk (or inside a task's) runs on that chunk's thread: nesting never
// multiplies the threads, whatever OMP_NESTED or an earlier parallel_tasks left in OpenMP's settings.
TEST_F(ParallelTasks, AParallelForInsideAnotherRunsOnItsThread) {
  ip::set_num_threads(4);
  ip::parallel_tasks(2, 2, [](std::int64_t) {});  // raised OpenMP's nesting limit
  for (int per_task : {0, 1, 2}) {
    std::vector<int> foreign(8, -1);
    auto outer = [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const auto me = std::this_thread::get_id();
        int other = 0;
        ip::parallel_for(64, 1, [&](std::int64_t, std::int64_t) { other += std::this_thread::get_id() != me; });
        foreign[static_cast<std::size_t>(i)] = other;
      }
    };
    if (per_task == 0) {
      ip::parallel_for(8, 1, outer);
    } else {  // per_task 2: two tasks at once, each parallel_for on two threads, the inner ones on one
      ip::parallel_tasks(4, per_task, [&](std::int64_t t) {
        ip::parallel_for(2, 1, [&](std::int64_t b, std::int64_t e) { outer(2 * t + b, 2 * t + e); });
      });
    }
    for (int f : foreign) EXPECT_EQ(f, 0) << per_task;
  }
}

}  // namespace
