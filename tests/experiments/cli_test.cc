// The indexpool command end to end: --version, --help, a tiny run, and bad input that exits non-zero
// before any work without touching an existing results file.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  Result r;
  const std::string cmd = std::string(IP_INDEXPOOL_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(CliTest, VersionAndHelp) {
  const auto v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("indexpool 0."), std::string::npos) << v.out;
  const auto h = run("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("run CONFIG"), std::string::npos);
  const auto rh = run("run --help");
  EXPECT_EQ(rh.code, 0);
  EXPECT_NE(rh.out.find("--set"), std::string::npos);
  const auto hc = run("run --help-config");
  EXPECT_EQ(hc.code, 0);
  EXPECT_NE(hc.out.find("pool.weighting"), std::string::npos);
  EXPECT_NE(hc.out.find("select.topk_tokens"), std::string::npos);
  EXPECT_NE(run("frobnicate").code, 0);
  EXPECT_NE(run("").code, 0);
}

TEST_F(CliTest, TinyRunPrintsTableAndWritesCsv) {
  const std::string csv = (dir_ / "out" / "r.csv").string();
  const auto cfg = file("tiny.ini", "[workload]\ntokens = 512\nsteps = 2\nindex_heads = 2\nattn_heads = 1\n"
                                    "[pool]\nweighting = uniform, exact\n[select]\ntopk_tokens = 64\n"
                                    "[output]\npath = " + csv + "\n");
  const auto r = run("run " + cfg + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("uniform"), std::string::npos);
  EXPECT_NE(r.out.find("exact"), std::string::npos);
  std::ifstream in(csv);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  EXPECT_NE(text.find("# indexpool"), std::string::npos);
  EXPECT_NE(text.find("# command:"), std::string::npos);
  EXPECT_NE(text.find("pool.weighting,status"), std::string::npos);
  int rows = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) rows += line.rfind("uniform,ok", 0) == 0 || line.rfind("exact,ok", 0) == 0;
  EXPECT_EQ(rows, 2);
}

TEST_F(CliTest, BadConfigFailsBeforeWorkAndKeepsExistingResults) {
  const std::string csv = (dir_ / "keep.csv").string();
  {
    std::ofstream(csv) << "precious\n";
  }
  const auto cfg = file("bad.ini", "[output]\npath = " + csv + "\n[pool]\ngroup_size = 4\nweighting = cosine, nope\n");
  const auto r = run("run " + cfg);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(cfg + ":5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pool.weighting"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[1/"), std::string::npos) << "a point ran: " << r.out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious");
}

TEST_F(CliTest, UnwritableOutputAndMissingImportFailBeforeWork) {
  const auto cfg = file("unwritable.ini", "[workload]\ntokens = 256\n[select]\ntopk_tokens = 16\n"
                                          "[output]\npath = /proc/indexpool/results.csv\n");
  const auto r = run("run " + cfg);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("output.path"), std::string::npos) << r.out;
  const auto cfg2 = file("import.ini", "[workload]\nsource = " + (dir_ / "nothere.h5").string() + "\n");
  const auto r2 = run("run " + cfg2);
  EXPECT_NE(r2.code, 0);
  EXPECT_NE(r2.out.find("nothere.h5"), std::string::npos) << r2.out;
  EXPECT_EQ(r2.out.find("[1/"), std::string::npos) << r2.out;
}

TEST_F(CliTest, PointThatCannotRunIsSkippedWithReason) {
  const auto cfg = file("skip.ini", "[workload]\ntokens = 256\nsteps = 1\n[select]\ntopk_tokens = 128, 512\n");
  const auto r = run("run " + cfg + " --quiet");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped: select.topk_tokens = 512 exceeds"), std::string::npos) << r.out;
}

}  // namespace
