// What a model is asked and what it answers, in one shape for every provider API (OpenAI Chat
// Completions, OpenAI Responses, Anthropic Messages): messages of text and multimodal parts,
// tools, the usual parameters; a reply's text, tool calls, reasoning and usage.
#pragma once

#include <mira/protocol/types.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::models {

namespace json = boost::json;

/// The provider APIs this layer speaks. Every server that speaks one of them works: an
/// OpenAI-compatible one (vLLM, Ollama, llama.cpp) through openai_chat.
enum class api {
  openai_chat,         ///< OpenAI Chat Completions: POST {base}/chat/completions
  openai_responses,    ///< OpenAI Responses: POST {base}/responses
  anthropic_messages,  ///< Anthropic Messages: POST {base}/v1/messages
};

/// "openai-chat", "openai-responses" or "anthropic": the names MIRA_JUDGE and a target's
/// metadata `api` use.
std::string_view name_of(api a) noexcept;
/// The api of such a name, or nullopt.
std::optional<api> api_named(std::string_view name) noexcept;

/// A function the model may call.
struct tool {
  std::string name{};
  std::string description{};
  /// Its arguments' JSON Schema; empty: an object with no properties.
  json::object parameters{};
};

/// One call of a tool, as a reply made it (and as a later request sends it back).
struct tool_call {
  std::string id{};
  std::string name{};
  /// The arguments: the JSON the model wrote, parsed; its text as a string when it is not JSON.
  json::value arguments{};
};

struct reply;

/// One message of the conversation. The system prompt is request::system, not a message.
struct message {
  /// "user", "assistant" or "tool" (a tool's result).
  std::string role = "user";
  /// Text and multimodal parts (protocol::part: text, image, audio, file, json). A media part
  /// gives its bytes as `data` (base64) or `uri` (a URL, or a data: URI).
  std::vector<protocol::part> content{};
  /// An assistant message's tool calls (a reply sent back as history).
  std::vector<tool_call> tool_calls{};
  /// A tool message: the id of the call it answers.
  std::string tool_call_id{};

  /// A user message of one text part.
  static message user(std::string text);
  /// A user message of these parts.
  static message user(std::vector<protocol::part> parts);
  /// The assistant message a reply is, for the next request of a conversation.
  static message assistant(const reply& r);
  /// A tool's result, answering the call `call_id`.
  static message tool_result(std::string call_id, std::string output);

  /// The text parts, joined by newlines.
  std::string text() const;
};

/// What to ask. Every member but `messages` may be left as it is.
struct request {
  std::vector<message> messages{};
  std::string system{};
  std::vector<tool> tools{};
  std::optional<double> temperature{};
  /// The most tokens to generate (max_tokens; max_output_tokens for Responses). Anthropic
  /// requires one: 4096 when unset.
  std::optional<std::int64_t> max_tokens{};
  /// Members added to the request body as they are (replacing one of the same name): any
  /// parameter of the API this layer does not name (top_p, seed, reasoning, response_format...).
  json::object extra{};

  /// A request of one user message.
  static request of(std::string prompt);
};

/// What the model answered.
struct reply {
  /// The text of the answer (its text parts, joined).
  std::string text{};
  std::vector<tool_call> tool_calls{};
  /// The model's reasoning, where the API returns it (Responses' reasoning summaries, Anthropic's
  /// thinking blocks, `reasoning_content` or `reasoning` of a compatible Chat server).
  std::string reasoning{};
  /// Tokens (input including cached ones; cache_read_tokens of them read from the provider's
  /// cache; reasoning_tokens of the output), and cost_usd when a price table names the model.
  protocol::usage usage{};
  /// Why the model stopped, in Chat Completions' words: "stop", "length", "tool_calls",
  /// "content_filter"; another API's reason that has none of these as it was given.
  std::string finish_reason{};
  /// The model that answered, as the provider names it.
  std::string model{};
  /// The provider's JSON answer, whole.
  json::value raw{};
  /// Answered from the response cache, not by the provider.
  bool from_cache = false;
};

/// A model's price, in US dollars per million tokens.
struct price {
  double input_per_million = 0.0;
  double output_per_million = 0.0;
};
/// Prices by model name (the request's model, else the one the reply names).
using price_table = std::map<std::string, price, std::less<>>;

}  // namespace mira::models
