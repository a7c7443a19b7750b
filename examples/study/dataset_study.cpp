// A study over a JSON Lines dataset: each line {"id", "input", "expected", optional "files"}
// (docs/study-datasets.md has the whole format). Its subject stands in for a model and runs
// offline: it answers the sample's expected answer back and, when the sample seeds files, writes
// them into a fresh work folder, reads them from there and says what it found. A real study
// would call a model or run an agent in that folder instead.
//
// Scorers: answer (the response is the expected answer, or includes it), files_seen (the
// response names every seeded file; N/A for a sample that seeds none).
//
// Usage: dataset_study --dataset FILE.jsonl [--peak-rss-file OUT]
//   (spawned by a host: `mira run -- dataset_study --dataset examples/study/data/qa.jsonl`);
//   --peak-rss-file writes the process's peak resident memory (VmHWM, in kB) to OUT at exit.
#include <mira/study.hpp>

#include <boost/json/serialize.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
using mira::protocol::transcript;

namespace {

std::string expected_text(const study::sample& s) {
  if (!s.expected) return {};
  if (auto* text = s.expected->if_string()) return std::string(*text);
  return json::serialize(*s.expected);
}

// A temporary folder, removed with everything in it when the case is over.
struct work_folder {
  std::filesystem::path path;
  work_folder() {
    auto pattern = (std::filesystem::temp_directory_path() / "dataset-study-XXXXXX").string();
    if (::mkdtemp(pattern.data())) path = pattern;
  }
  ~work_folder() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
  work_folder(const work_folder&) = delete;
  work_folder& operator=(const work_folder&) = delete;
};

// What an agent would see: the sample's files written into a work folder, read back from there.
// Blocking file I/O: the subject runs it on the study's pool.
std::string look_at_files(const std::vector<study::seed_file>& files, std::string& error) {
  work_folder folder;
  if (folder.path.empty()) {
    error = std::string("cannot make a work folder: ") + std::strerror(errno);
    return {};
  }
  if (auto written = study::materialize_files(files, folder.path); !written) {
    error = written.error().message();
    return {};
  }
  std::string seen;
  for (auto& f : files) {
    std::ifstream in(folder.path / f.path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    seen += "\nread " + f.path + " (" + std::to_string(text.size()) +
            " bytes): " + text.substr(0, text.find('\n'));
  }
  return seen;
}

asio::awaitable<transcript> answer_expected(study::run_context& c) {
  transcript t;
  t.final_response = expected_text(c.sample());
  if (!c.sample().files.empty()) {
    std::string error;
    auto seen = co_await c.blocking([&] { return look_at_files(c.sample().files, error); });
    t.final_response += seen;
    if (!error.empty()) t.error = error;
  }
  co_return t;
}

mira::protocol::score answer_scorer(const study::sample& s, const transcript& t) {
  auto want = expected_text(s);
  if (t.final_response == want) return study::pass("answer", "the expected answer");
  if (!want.empty() && t.final_response.find(want) != std::string::npos)
    return study::pass("answer", "includes the expected answer");
  return study::fail("answer", "neither is nor includes \"" + want + "\"");
}

mira::protocol::score files_scorer(const study::sample& s, const transcript& t) {
  if (s.files.empty()) return study::not_applicable("files_seen", "the sample seeds no files");
  for (auto& f : s.files)
    if (t.final_response.find("read " + f.path + " ") == std::string::npos)
      return study::fail("files_seen", "never read " + f.path);
  return study::pass("files_seen", "read every seeded file");
}

void write_peak_rss(const char* out) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) std::ofstream(out) << std::atol(line.c_str() + 6) << "\n";
}

int usage() {
  std::fprintf(stderr, "usage: dataset_study --dataset FILE.jsonl [--peak-rss-file OUT]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* file = nullptr;
  const char* rss_out = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && std::strcmp(argv[i], "--dataset") == 0)
      file = argv[++i];
    else if (i + 1 < argc && std::strcmp(argv[i], "--peak-rss-file") == 0)
      rss_out = argv[++i];
    else
      return usage();
  }
  if (!file) return usage();
  auto data = study::jsonl(file);
  if (!data) {
    std::fprintf(stderr, "dataset_study: %s\n", data.error().message().c_str());
    return 2;
  }
  study::registry s("dataset-study", "0.1.0");
  s.add("qa")
      .description("Answers each sample's expected answer back, reading its seeded files")
      .dataset(*data)
      .add_target("echo", "sim")
      .score_with(study::make_scorer("answer", answer_scorer))
      .score_with(study::make_scorer("files_seen", files_scorer))
      .subject(answer_expected);
  int rc = study::serve_stdio(s);
  if (rss_out) write_peak_rss(rss_out);
  return rc;
}
