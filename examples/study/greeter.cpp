// greeter.cpp: one eval, three samples, one target, one scorer.
#include <mira/study.hpp>

namespace study = mira::study;
using mira::protocol::transcript;

int main() {
  study::registry s("greeter", "0.1.0");
  s.add("greet")
      .samples({{"hi"}, {"hello"}, {"hey"}})
      .add_target("sim", "sim")
      .score_with(study::scorers::contains("42"))
      .subject([](study::run_context& c) -> boost::asio::awaitable<transcript> {
        transcript t;
        t.final_response = "Hi " + c.id().sample + "! The answer is 42.";
        co_return t;
      });
  return study::serve_stdio(s);
}
