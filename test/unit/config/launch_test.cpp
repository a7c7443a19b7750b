// Study launch resolution over a fake system: each --study kind, each mode, launchers and their
// precedence, and the errors that say what is missing. The real launchers are run by
// test/integration/cli_launch_test.cpp.
#include <boost/test/unit_test.hpp>

#include "common/temp_dir.hpp"

#include <mira/config/launch.hpp>
#include "config/study_scripts.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <set>

namespace cfg = mira::config;
namespace fs = std::filesystem;
using strings = std::vector<std::string>;

namespace {

struct fake_system {
  std::set<std::string> programs{"python3", "node", "cargo"};
  std::set<std::string> files{"s.py", "meta.py", "s.mjs", "s.js", "tool", "notes.txt", "study.rs"};
  std::set<std::string> executables{"tool"};

  cfg::system_probe probe() const {
    cfg::system_probe p;
    p.find_program = [this](const std::string& name) -> std::optional<fs::path> {
      if (programs.count(name)) return "/usr/bin/" + name;
      return std::nullopt;
    };
    p.is_file = [this](const fs::path& f) { return files.count(f.string()) > 0; };
    p.is_executable = [this](const fs::path& f) { return executables.count(f.string()) > 0; };
    p.head = [](const fs::path& f) {
      return f == "meta.py" ? std::string("#!/usr/bin/env -S uv run\n# /// script\n# ///\n")
                            : std::string("print()\n");
    };
    p.cargo_script_crate = [](const fs::path& f) -> tl::expected<fs::path, cfg::error> {
      return fs::path("/tmp/mira-script") / (f.stem().string() + "-0") / "Cargo.toml";
    };
    return p;
  }
};

cfg::launch_request mode(cfg::launch_mode m, std::string value) {
  cfg::launch_request r;
  r.mode = m;
  r.value = std::move(value);
  return r;
}

strings argv_of(const cfg::launch_request& r, const fake_system& sys = {},
                const cfg::config& c = {}) {
  auto got = cfg::resolve_launch(r, c, sys.probe());
  BOOST_REQUIRE_MESSAGE(got, (got ? "" : got.error().message()));
  return got->argv;
}

cfg::error failure(const cfg::launch_request& r, const fake_system& sys = {},
                   const cfg::config& c = {}) {
  auto got = cfg::resolve_launch(r, c, sys.probe());
  BOOST_REQUIRE(!got);
  return got.error();
}

std::string error_of(const cfg::launch_request& r, const fake_system& sys = {},
                     const cfg::config& c = {}) {
  return failure(r, sys, c).message();
}

boost::system::error_code code_of(const cfg::launch_request& r, const fake_system& sys = {},
                                  const cfg::config& c = {}) {
  return failure(r, sys, c).code;
}

cfg::config config_of(const std::string& text) {
  auto c = cfg::parse_config(text, "mira.toml");
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : c.error().to_string()));
  return *c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_launch)

BOOST_AUTO_TEST_CASE(study_picks_the_runner_from_the_file) {
  using cfg::launch_mode;
  BOOST_TEST(argv_of(mode(launch_mode::study, "s.py")) == (strings{"python3", "s.py"}));
  BOOST_TEST(argv_of(mode(launch_mode::study, "s.mjs")) == (strings{"node", "s.mjs"}));
  BOOST_TEST(argv_of(mode(launch_mode::study, "s.js")) == (strings{"node", "s.js"}));
  BOOST_TEST(argv_of(mode(launch_mode::study, "tool")) == (strings{"./tool"}));
  BOOST_TEST(
      argv_of(mode(launch_mode::study, "study.rs")) ==
      (strings{"cargo", "run", "-q", "--manifest-path", "/tmp/mira-script/study-0/Cargo.toml",
               "--target-dir", "/tmp/mira-script/target"}));
  // Inline script metadata goes through uv when uv is there, python3 otherwise.
  BOOST_TEST(argv_of(mode(launch_mode::study, "meta.py")) == (strings{"python3", "meta.py"}));
  fake_system with_uv;
  with_uv.programs.insert("uv");
  BOOST_TEST(argv_of(mode(launch_mode::study, "meta.py"), with_uv) ==
             (strings{"uv", "run", "meta.py"}));
  BOOST_TEST(argv_of(mode(launch_mode::study, "s.py"), with_uv) == (strings{"python3", "s.py"}));
}

BOOST_AUTO_TEST_CASE(study_errors_say_what_is_missing) {
  using cfg::launch_mode;
  auto kinds = error_of(mode(launch_mode::study, "notes.txt"));
  BOOST_TEST(kinds.find("cannot tell how to run notes.txt (--study): expected a .py file") == 0u,
             kinds);
  for (auto* kind : {".mjs or .js file (node)", ".rs file (cargo)", "an executable", "uv run"})
    BOOST_TEST(kinds.find(kind) != std::string::npos, kind);
  BOOST_TEST((code_of(mode(launch_mode::study, "notes.txt")) == cfg::errc::invalid));
  BOOST_TEST(error_of(mode(launch_mode::study, "gone.py")) == "--study: no such file: gone.py");
  BOOST_TEST((code_of(mode(launch_mode::study, "gone.py")) == cfg::errc::not_found));
  fake_system bare;
  bare.programs.clear();
  BOOST_TEST((code_of(mode(launch_mode::study, "s.py"), bare) == cfg::errc::missing_program));
  BOOST_TEST(error_of(mode(launch_mode::study, "s.py"), bare) ==
             "python3 is not on PATH; it is needed to run s.py");
  BOOST_TEST(error_of(mode(launch_mode::study, "s.mjs"), bare) ==
             "node is not on PATH; it is needed to run s.mjs");
  BOOST_TEST(error_of(mode(launch_mode::script, "study.rs"), bare) ==
             "cargo is not on PATH; it is needed to run study.rs");
  BOOST_TEST(error_of(mode(launch_mode::bin, "greet"), bare) ==
             "cargo is not on PATH; it is needed to run cargo bin greet");
  BOOST_TEST(error_of(mode(launch_mode::uv, "s.py")) ==
             "uv is not on PATH; it is needed to run s.py");
}

BOOST_AUTO_TEST_CASE(each_mode_builds_its_command) {
  using cfg::launch_mode;
  BOOST_TEST(argv_of(mode(launch_mode::python, "s.py --n '2 3'")) ==
             (strings{"python3", "s.py", "--n", "2 3"}));
  fake_system with_uv;
  with_uv.programs.insert("uv");
  BOOST_TEST(argv_of(mode(launch_mode::uv, "s.py -v"), with_uv) ==
             (strings{"uv", "run", "s.py", "-v"}));
  BOOST_TEST(argv_of(mode(launch_mode::cmd, "./study --name \"a b\" c\\ d")) ==
             (strings{"./study", "--name", "a b", "c d"}));
  auto bin = mode(launch_mode::bin, "greet");
  BOOST_TEST(argv_of(bin) == (strings{"cargo", "run", "-q", "--bin", "greet"}));
  bin.package = "examples";
  bin.manifest_path = "rust/Cargo.toml";
  BOOST_TEST(argv_of(bin) == (strings{"cargo", "run", "-q", "-p", "examples", "--bin", "greet",
                                      "--manifest-path", "rust/Cargo.toml"}));
  BOOST_TEST(argv_of(mode(launch_mode::example, "demo")) ==
             (strings{"cargo", "run", "-q", "--example", "demo"}));
  cfg::launch_request after_dashes;
  after_dashes.argv = {"./s", "--x"};
  BOOST_TEST(argv_of(after_dashes) == (strings{"./s", "--x"}));
  BOOST_TEST(error_of(mode(launch_mode::cmd, "a 'b")) ==
             "--study-cmd: has an unterminated ' quote");
  BOOST_TEST(error_of(mode(launch_mode::cmd, "  ")) == "--study-cmd is empty");
  BOOST_TEST((code_of(mode(launch_mode::cmd, "a 'b")) == cfg::errc::invalid));
  BOOST_TEST((code_of(mode(launch_mode::cmd, "  ")) == cfg::errc::invalid));
  BOOST_TEST((code_of(mode(launch_mode::bin, "")) == cfg::errc::invalid));  // needs a name
  auto py = mode(launch_mode::python, "s.py");
  py.package = "p";
  BOOST_TEST(error_of(py).find("--package and --manifest-path go with --study-bin") == 0u);
  BOOST_TEST((code_of(py) == cfg::errc::conflict));
}

BOOST_AUTO_TEST_CASE(launchers_default_and_override) {
  auto c = config_of(R"(default_launcher = "js"
[launchers.js]
cmd = "node s.mjs"
[launchers.cargo]
bin = "greet"
package = "pk"
)");
  cfg::launch_request none;
  auto got = cfg::resolve_launch(none, c, fake_system{}.probe());
  BOOST_REQUIRE(got);
  BOOST_TEST(got->argv == (strings{"node", "s.mjs"}));
  BOOST_TEST(got->origin == "launcher \"js\" (default_launcher in mira.toml)");
  cfg::launch_request named;
  named.launcher = "cargo";
  BOOST_TEST(argv_of(named, {}, c) ==
             (strings{"cargo", "run", "-q", "-p", "pk", "--bin", "greet"}));
  named.package = "other";  // --package overlays the launcher's
  BOOST_TEST(argv_of(named, {}, c) ==
             (strings{"cargo", "run", "-q", "-p", "other", "--bin", "greet"}));
  // An explicit mode replaces the launcher's mode and keeps its cargo options.
  auto example = mode(cfg::launch_mode::example, "demo");
  example.launcher = "cargo";
  BOOST_TEST(argv_of(example, {}, c) ==
             (strings{"cargo", "run", "-q", "-p", "pk", "--example", "demo"}));
  // Another explicit mode cannot use the launcher's cargo options: they are dropped, while the
  // command line's own are refused.
  auto python = mode(cfg::launch_mode::python, "s.py");
  python.launcher = "cargo";
  BOOST_TEST(argv_of(python, {}, c) == (strings{"python3", "s.py"}));
  python.package = "mine";
  BOOST_TEST(error_of(python, {}, c).find("--package and --manifest-path go with") == 0u);
  // ...and wins over default_launcher.
  BOOST_TEST(argv_of(mode(cfg::launch_mode::study, "tool"), {}, c) == (strings{"./tool"}));
  cfg::launch_request unknown;
  unknown.launcher = "jss";
  BOOST_TEST(error_of(unknown, {}, c) ==
             "unknown launcher \"jss\" (known: cargo, js in mira.toml)");
  BOOST_TEST((code_of(unknown, {}, c) == cfg::errc::not_found));
  BOOST_TEST(error_of(cfg::launch_request{}).find("no study to run: give --study PATH") == 0u);
  BOOST_TEST((code_of(cfg::launch_request{}) == cfg::errc::no_study));
}

BOOST_AUTO_TEST_CASE(inline_script_metadata_is_a_whole_line) {
  BOOST_TEST(cfg::has_inline_script_metadata("# /// script\n# dependencies = []\n# ///\n"));
  BOOST_TEST(cfg::has_inline_script_metadata("import x\r\n# /// script\r\n"));
  BOOST_TEST(!cfg::has_inline_script_metadata("# /// scripts\n"));
  BOOST_TEST(!cfg::has_inline_script_metadata("x = '# /// script'\n"));
}

BOOST_AUTO_TEST_CASE(a_single_file_rust_study_becomes_a_crate) {
  auto crate = cfg::make_cargo_script(R"(#!/usr/bin/env cargo
---
[dependencies]
local = { path = "../lib" }
serde = "1"
---

fn main() {}
)",
                                      "my_study", "/src/studies");
  BOOST_REQUIRE_MESSAGE(crate, (crate ? "" : crate.error().message()));
  // The body keeps its line numbers.
  BOOST_TEST(crate->main_rs == "\n\n\n\n\n\n\nfn main() {}\n");
  auto& m = crate->manifest;
  for (auto* piece : {"name = 'my_study'", "edition = '2024'", "path = '/src/lib'", "serde = '1'",
                      "[workspace]", "[[bin]]", "path = 'main.rs'"})
    BOOST_TEST(m.find(piece) != std::string::npos, piece << " in\n" << m);
  auto plain = cfg::make_cargo_script("#![allow(unused)]\nfn main() {}\n", "s", "/");
  BOOST_REQUIRE(plain);
  BOOST_TEST(plain->main_rs == "#![allow(unused)]\nfn main() {}\n");  // an attribute, kept
  auto open = cfg::make_cargo_script("---\n[dependencies]\nfn main() {}\n", "s", "/");
  BOOST_REQUIRE(!open);
  BOOST_TEST((open.error().code == cfg::errc::invalid));
  BOOST_TEST(open.error().message() == "1: the --- front matter is not closed");
  auto bad = cfg::make_cargo_script("---\n[dependencies\n---\n", "s", "/");
  BOOST_REQUIRE(!bad);
  BOOST_TEST((bad.error().code == cfg::errc::invalid));
  BOOST_TEST(bad.error().message().find("2:") == 0u, bad.error().message());
}

BOOST_AUTO_TEST_CASE(a_script_crate_is_not_written_into_another_users_folder) {
  mira::test::temp_dir t;
  std::ofstream(t.path / "s.rs") << "fn main() {}\n";
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", t.path.c_str(), 1);
  auto own = cfg::system_probe::real().cargo_script_crate(t.path / "s.rs");
  BOOST_TEST(own.has_value(), (own ? "" : own.error().message()));
  BOOST_TEST(((fs::status(t.path / "mira-script").permissions() & fs::perms::all) ==
              fs::perms::owner_all));
  // The same folder made by someone else first (nobody's uid; needs root to set up).
  fs::remove_all(t.path / "mira-script");
  fs::create_directory(t.path / "mira-script");
  if (::chown((t.path / "mira-script").c_str(), 65534, 65534) == 0) {
    auto theirs = cfg::system_probe::real().cargo_script_crate(t.path / "s.rs");
    BOOST_REQUIRE(!theirs.has_value());
    BOOST_TEST((theirs.error().code == cfg::errc::io));
    BOOST_TEST(theirs.error().message().find("is not a folder of this user's") != std::string::npos,
               theirs.error().message());
  }
  if (old)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

BOOST_AUTO_TEST_CASE(errors_are_codes_in_the_config_category) {
  std::set<std::string> messages;
  for (auto e : {cfg::errc::not_found, cfg::errc::invalid, cfg::errc::conflict,
                 cfg::errc::missing_program, cfg::errc::no_study, cfg::errc::io}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.config"));
    BOOST_TEST(ec.message() != "unknown config error");
    messages.insert(ec.message());
  }
  BOOST_TEST(messages.size() == 6u);
}

BOOST_AUTO_TEST_SUITE_END()
