// A study whose samples are images: each asks a model which colour a square is, the image sent as
// an image part read from a file (a data URI), and passes when the answer names the colour.
//
// Targets: `openai/<MIRA_OPENAI_MODEL, default gpt-4o-mini>` (Chat Completions, or any
// OpenAI-compatible server at OPENAI_BASE_URL) and `anthropic/<MIRA_ANTHROPIC_MODEL, default
// claude-haiku-4-5>`, each listed unavailable without its key (OPENAI_API_KEY,
// ANTHROPIC_API_KEY), so the host skips it. The images are read from --images DIR (the folder
// holding red_square.png and blue_square.png; the bundled examples/study/data by default).
//
// Usage: mira run -- multimodal
//        mira run -- multimodal --images path/to/data
#include <mira/models/provider.hpp>
#include <mira/models/targets.hpp>
#include <mira/study.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace parts = mira::study::parts;
namespace study = mira::study;
using mira::protocol::transcript;

namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// One sample: the question as a text part and the square as an image part, one user message.
tl::expected<study::sample, std::string> square(const std::filesystem::path& dir,
                                                std::string colour) {
  auto file = dir / (colour + "_square.png");
  auto image = parts::image_file(file);
  if (!image) return tl::unexpected(image.error().message());
  study::sample s{colour, {}, json::value(colour)};
  s.input = json::array{json::value(parts::message(
      "user", {parts::text("What colour is this square? Answer with one word."), *image}))};
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path images = MULTIMODAL_IMAGES;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--images" && i + 1 < argc) {
      images = argv[++i];
    } else {
      std::cerr << "usage: multimodal [--images DIR]\n";
      return 2;
    }
  }
  std::vector<study::sample> samples;
  for (const char* colour : {"red", "blue"}) {
    auto s = square(images, colour);
    if (!s) {
      std::cerr << "multimodal: " << s.error() << '\n';
      return 2;
    }
    samples.push_back(std::move(*s));
  }

  study::registry s("multimodal", "0.1.0");
  s.add("colour")
      .description("Names the colour of a square shown as an image part")
      .samples(std::move(samples))
      .add_target(models::openai_target(env_or("MIRA_OPENAI_MODEL", "gpt-4o-mini")))
      .add_target(models::anthropic_target(env_or("MIRA_ANTHROPIC_MODEL", "claude-haiku-4-5")))
      .score_with(study::make_scorer(
          "names_the_colour",
          [](const study::sample& sm, const transcript& t) {
            return lowercase(t.final_response).find(std::string(sm.expected->as_string())) !=
                   std::string::npos;
          }))
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        auto model = models::for_target(c);
        co_return co_await model.answer(c);
      });
  return study::serve_stdio(s);
}
