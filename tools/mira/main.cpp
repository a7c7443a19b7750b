// The `mira` executable. `run` and `score` start once more with glibc's malloc asked for
// transparent huge pages (see huge_pages below); everything else goes straight to the CLI.
#include "cli.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// A run keeps every case until its report: ~80 MB of fresh heap for 100 000 cases. On a VM
// each first touch of a 4 KiB page is a costly fault (perf: ~20 % of a 100 000-case run, 24 000
// faults); with glibc.malloc.hugetlb=1 malloc advises huge pages and the same run takes about
// 4 000 (docs/archive/performance-log.md). The tunable is only read at start-up, so mira starts
// itself again with it, and gives the study the environment it was given. MIRA_NO_HUGE_PAGES=1,
// or a GLIBC_TUNABLES that already sets it, leaves things as they are.
constexpr const char* saved_tunables = "MIRA_SAVED_GLIBC_TUNABLES";  // "=" + value, or "-"

void huge_pages(int argc, char** argv) {
  if (const char* saved = std::getenv(saved_tunables)) {  // started again: restore for children
    if (saved[0] == '=')
      ::setenv("GLIBC_TUNABLES", saved + 1, 1);
    else
      ::unsetenv("GLIBC_TUNABLES");
    ::unsetenv(saved_tunables);
    return;
  }
  if (argc < 2 || (std::strcmp(argv[1], "run") != 0 && std::strcmp(argv[1], "score") != 0)) return;
  if (const char* no = std::getenv("MIRA_NO_HUGE_PAGES"); no && *no && std::strcmp(no, "0") != 0)
    return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.hugetlb")) return;
  const bool had = tunables != nullptr;
  const std::string original = had ? tunables : "";
  std::string saved = had ? "=" + original : std::string("-");
  std::string wanted = original.empty() ? std::string("glibc.malloc.hugetlb=1")
                                        : original + ":glibc.malloc.hugetlb=1";
  if (::setenv(saved_tunables, saved.c_str(), 1) != 0 ||
      ::setenv("GLIBC_TUNABLES", wanted.c_str(), 1) != 0)
    return;
  // The executable's own path, not /proc/self/exe: the process keeps its name ("mira", not
  // "exe") in ps, top and perf.
  char self[4096];
  auto len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    ::execv(self, argv);
  }
  // Not started again (no /proc, or the executable is gone): go on as we are, with the
  // environment as it was.
  if (had)
    ::setenv("GLIBC_TUNABLES", original.c_str(), 1);
  else
    ::unsetenv("GLIBC_TUNABLES");
  ::unsetenv(saved_tunables);
}

}  // namespace

int main(int argc, char** argv) {
  huge_pages(argc, argv);
  return mira::cli::main({argv + 1, argv + argc});
}
