// A study built on the installed study SDK alone (mira::study): the case the host consumer
// (main.cpp) runs, greet/hi@sim, passes.
#include <mira/study.hpp>

int main() {
  namespace study = mira::study;
  study::registry s("consumer-study", "1.0");
  s.add("greet")
      .add_sample({"hi"})
      .add_target("sim", "sim")
      .score_with(study::scorers::contains("42"))
      .subject([](study::run_context&) -> boost::asio::awaitable<mira::protocol::transcript> {
        mira::protocol::transcript t;
        t.final_response = "The answer is 42.";
        co_return t;
      });
  return study::serve_stdio(s);
}
