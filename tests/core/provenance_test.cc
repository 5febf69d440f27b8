// core/provenance.h: the command line written into results files and benchmark JSON.
#include "core/provenance.h"

#include <gtest/gtest.h>

#include <regex>

namespace ip {
namespace {

std::string line(std::initializer_list<const char*> args) {
  std::vector<const char*> v(args);
  return command_line(static_cast<int>(v.size()), v.data());
}

TEST(Provenance, CommandLineQuotesWhatAShellWouldRead) {
  EXPECT_EQ(line({"indexpool", "run", "configs/quickstart.ini", "--set", "pool.weighting=exact,uniform"}),
            "indexpool run configs/quickstart.ini --set pool.weighting=exact,uniform");
  EXPECT_EQ(line({"indexpool", "--set", "output.path=/tmp/my results.h5"}),
            "indexpool --set 'output.path=/tmp/my results.h5'");
  EXPECT_EQ(line({"kb", "it's", ""}), "kb 'it'\\''s' ''");
  EXPECT_EQ(line({"a;b", "$HOME", "x*"}), "'a;b' '$HOME' 'x*'");
}

TEST(Provenance, UtcNowIsIso8601) {
  EXPECT_TRUE(std::regex_match(utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << utc_now();
}

}  // namespace
}  // namespace ip
