// Targets that are models: listed available only when their provider's key is set (the reason in
// their metadata otherwise, which `mira list` shows), with the model in their metadata; and the
// provider of a case's target, for a subject that runs whichever model the case names.
#pragma once

#include <mira/models/provider.hpp>
#include <mira/protocol/types.hpp>
#include <mira/study/context.hpp>

#include <string>
#include <string_view>

namespace mira::models {

/// A target labelled `<provider>/<model>` of this provider, available iff the variable
/// `key_variable` is set to something other than white space. Its metadata holds `model`,
/// and when unavailable `unavailable_reason` ("<key_variable> is not set"): the protocol's
/// TargetInfo has no field for a reason, and `mira list` prints metadata.
protocol::target_info key_gated_target(std::string provider, std::string model,
                                       std::string_view key_variable);

/// An OpenAI model, gated on OPENAI_API_KEY; metadata `api` names the API the case's provider
/// speaks (for_target), "openai-chat" or "openai-responses".
protocol::target_info openai_target(std::string model, api kind = api::openai_chat);
/// An Anthropic model, gated on ANTHROPIC_API_KEY.
protocol::target_info anthropic_target(std::string model);

/// The model a target names in its metadata (`model`), or empty.
std::string model_of(const protocol::target_info& t);
/// The model of the case's target.
inline std::string model_of(const study::run_context& c) {
  return model_of(c.target());
}

/// The provider of the case's target: the target's provider ("openai", with its metadata `api`,
/// or "anthropic") and model. Throws study::request_error (subject_failed) for a target that
/// names no model, or a provider this layer does not speak.
provider for_target(const study::run_context& c, provider_options options = {});

}  // namespace mira::models
