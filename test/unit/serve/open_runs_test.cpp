// The server's open runs: a run read again while its folder is unchanged is the reader kept,
// one whose folder changed is opened anew, the least recently used goes beyond two, and a run
// that is not there is 404.
#include "serve/open_runs.hpp"

#include <mira/store/run_store.hpp>

#include "common/temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <fstream>

using mira::serve::detail::open_runs;
namespace fs = std::filesystem;

namespace {

void make_run(const fs::path& results, const std::string& id) {
  auto w = mira::store::run_store::create(results, id, mira::store::layout::compact);
  BOOST_REQUIRE(w.has_value());
  BOOST_REQUIRE(!w->begin_session({}));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(open_runs_tests)

// A lease held keeps its reader alive, so a reader opened meanwhile is told apart by its address.
BOOST_AUTO_TEST_CASE(a_run_is_kept_open_while_its_folder_is_unchanged) {
  mira::test::temp_dir d;
  const std::string a = "20261207T000000Z-aaaa", b = "20261207T000000Z-bbbb",
                    c = "20261207T000000Z-cccc";
  for (auto& id : {a, b, c}) make_run(d.path, id);
  open_runs o;
  const mira::store::run_reader* kept = nullptr;
  {
    auto first = o.open(d.path, a);
    BOOST_REQUIRE(first.has_value());
    {  // meta.json rewritten (a resume's session): opened again
      std::ofstream(d.path / a / "meta.json", std::ios::app) << " ";
    }
    auto second = o.open(d.path, a);
    BOOST_REQUIRE(second.has_value());
    BOOST_TEST(&**second != &**first);
    kept = &**second;
  }
  {
    auto again = o.open(d.path, a);  // unchanged since: the reader kept
    BOOST_REQUIRE(again.has_value());
    BOOST_TEST(&**again == kept);
  }
  auto held = o.open(d.path, a);
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(o.open(d.path, b).has_value());
  BOOST_TEST(o.open(d.path, c).has_value());  // a was used least recently: it goes
  auto reopened = o.open(d.path, a);
  BOOST_REQUIRE(reopened.has_value());
  BOOST_TEST(&**reopened != &**held);

  auto missing = o.open(d.path, "20261207T000000Z-none");
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().status == 404u);
}

BOOST_AUTO_TEST_SUITE_END()
