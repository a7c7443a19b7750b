// Model targets (see targets.hpp).
#include <mira/models/targets.hpp>
#include <mira/study/error.hpp>

#include <cstdlib>

namespace mira::models {

protocol::target_info key_gated_target(std::string provider, std::string model,
                                       std::string_view key_variable) {
  protocol::target_info t;
  t.label = provider + "/" + model;
  t.provider = std::move(provider);
  const char* key = std::getenv(std::string(key_variable).c_str());
  t.available = key && std::string_view(key).find_first_not_of(" \t\r\n") != std::string_view::npos;
  t.metadata["model"] = model;
  if (!t.available) t.metadata["unavailable_reason"] = std::string(key_variable) + " is not set";
  return t;
}

protocol::target_info openai_target(std::string model, api kind) {
  auto t = key_gated_target("openai", std::move(model), "OPENAI_API_KEY");
  t.metadata["api"] = name_of(kind);
  return t;
}

protocol::target_info anthropic_target(std::string model) {
  return key_gated_target("anthropic", std::move(model), "ANTHROPIC_API_KEY");
}

std::string model_of(const protocol::target_info& t) {
  const auto* m = t.metadata.if_contains("model");
  return m && m->is_string() ? std::string(m->get_string()) : std::string();
}

provider for_target(const study::run_context& c, provider_options options) {
  const auto& t = c.target();
  auto model = model_of(t);
  if (model.empty())
    throw study::request_error(study::errc::subject_failed,
                               "target " + t.label + " names no model (metadata \"model\")");
  if (t.provider == "anthropic")
    return {api::anthropic_messages, std::move(model), std::move(options)};
  if (t.provider == "openai") {
    const auto* named = t.metadata.if_contains("api");
    auto kind = named && named->is_string() ? api_named(named->get_string()) : api::openai_chat;
    if (!kind)
      throw study::request_error(
          study::errc::subject_failed,
          "target " + t.label + ": no such OpenAI API as its metadata names");
    return {*kind, std::move(model), std::move(options)};
  }
  throw study::request_error(study::errc::subject_failed,
                             "target " + t.label + ": provider \"" + t.provider +
                                 "\" is not one mira::models speaks (openai, anthropic)");
}

}  // namespace mira::models
