// An agent's events stream and ATIF file read into a transcript (see agent_io.hpp). The stream
// is a line-at-a-time way of writing a trajectory, so it goes through the typed builder: an
// events agent gets the same trajectory-based scorers as one writing ATIF.
#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>
#include <mira/study/trajectory.hpp>

#include <boost/json/parse.hpp>

#include "study/agent_io.hpp"

namespace mira::study::detail {

namespace {

// What is wrong with one line; caught where the line number is known.
struct bad_line {
  std::string what;
};

std::string quoted(std::string_view key) {
  return "\"" + std::string(key) + "\"";
}

std::optional<std::string> opt_string(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) throw bad_line{quoted(key) + " must be a string"};
  return std::string(v->get_string());
}

std::string need_string(const json::object& o, std::string_view key) {
  auto s = opt_string(o, key);
  if (!s) throw bad_line{quoted(key) + " is missing"};
  return std::move(*s);
}

std::int64_t count(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return 0;
  if (const auto* i = v->if_int64(); i && *i >= 0) return *i;
  if (const auto* u = v->if_uint64()) return static_cast<std::int64_t>(*u);
  throw bad_line{quoted(key) + " must be a count"};
}

double amount(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return 0;
  if (!v->is_number()) throw bad_line{quoted(key) + " must be a number"};
  return v->to_number<double>();
}

class events_reader {
 public:
  explicit events_reader(std::string_view agent) : tb_(std::string(agent), "0") {}

  // One line's object of this kind; throws bad_line. Kinds it does not know are only kept.
  void apply(const json::object& o, std::string_view kind, protocol::transcript& t) {
    if (kind == "user") {
      tb_.user(need_string(o, "text"));
    } else if (kind == "system") {
      tb_.system(need_string(o, "text"));
    } else if (kind == "turn") {
      auto& s = tb_.agent();
      if (auto m = opt_string(o, "model")) s.model(std::move(*m));
    } else if (kind == "reasoning") {
      current().reasoning(need_string(o, "text"));
    } else if (kind == "output") {
      current().append(need_string(o, "text"));
    } else if (kind == "message") {
      current().message(need_string(o, "text"));
    } else if (kind == "tool_call") {
      apply_call(o);
    } else if (kind == "tool_result") {
      apply_result(o);
    } else if (kind == "usage") {
      current().usage({count(o, "input_tokens"), count(o, "output_tokens"),
                       count(o, "cache_read_tokens"), count(o, "reasoning_tokens"),
                       amount(o, "cost_usd")});
    } else if (kind == "error") {
      apply_error(o, t);
    }
  }

  void finish(protocol::transcript& t) const {
    if (!tb_.steps().empty()) tb_.fill(t);
  }

 private:
  // Agent content goes to the last step when it is an agent's, else to a new agent step.
  step& current() {
    if (!tb_.steps().empty() && tb_.steps().back().source() == step_source::agent)
      return *tb_.last_agent();
    return tb_.agent();
  }

  void apply_call(const json::object& o) {
    auto name = need_string(o, "tool");
    json::value args = json::object();
    if (const auto* a = o.if_contains("arguments")) args = *a;
    current().call(std::move(name), std::move(args), opt_string(o, "id").value_or(""));
  }

  void apply_result(const json::object& o) {
    std::string content;
    if (const auto* c = o.if_contains("content"); c && !c->is_null())
      content = c->is_string() ? std::string(c->get_string()) : protocol::to_json_text(*c);
    current().result(std::move(content), opt_string(o, "id").value_or(""));
  }

  static void apply_error(const json::object& o, protocol::transcript& t) {
    auto message = need_string(o, "message");
    auto kind = opt_string(o, "error_kind").value_or("subject");
    if (kind != "subject" && kind != "infra")
      throw bad_line{"\"error_kind\" must be \"subject\" or \"infra\""};
    if (t.error) return;  // the first error is the cause
    t.error = std::move(message);
    t.error_kind = kind == "infra" ? protocol::error_kind::infra : protocol::error_kind::subject;
  }

  trajectory_builder tb_;
};

agent_error malformed(std::size_t line, const std::string& what) {
  return {make_error_code(agent_errc::malformed_events),
          "events line " + std::to_string(line) + ": " + what};
}

// ATIF's required members, which protocol::project (lenient, for the host) does not ask for.
std::optional<std::string> missing_required(const json::object& doc) {
  const auto* agent = doc.if_contains("agent");
  if (!agent || !agent->is_object()) return "agent: expected an object";
  for (const char* key : {"name", "version"}) {
    const auto* v = agent->get_object().if_contains(key);
    if (!v || !v->is_string()) return std::string("agent.") + key + ": expected a string";
  }
  const auto* steps = doc.if_contains("steps");
  if (!steps) return "steps: missing";
  std::size_t i = 0;
  for (const auto& s : steps->get_array()) {  // project() checked that it is an array of objects
    const auto& step = s.get_object();
    const auto* id = step.if_contains("step_id");
    const auto* source = step.if_contains("source");
    const auto where = "steps[" + std::to_string(i++) + "]";
    if (!id || !(id->is_int64() || id->is_uint64())) return where + ".step_id: expected an integer";
    if (!source || !source->is_string()) return where + ".source: expected a string";
  }
  return std::nullopt;
}

}  // namespace

std::optional<agent_error> read_events(std::string_view text, std::string_view agent_name,
                                       protocol::transcript& t) {
  events_reader reader(agent_name);
  std::size_t number = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    auto end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    auto line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    if (ec) return malformed(number, "not JSON (" + ec.message() + ")");
    auto* o = v.if_object();
    if (!o) return malformed(number, "not a JSON object");
    const auto* kind = o->if_contains("kind");
    if (!kind || !kind->is_string()) return malformed(number, "no \"kind\" string");
    try {
      reader.apply(*o, kind->get_string(), t);
    } catch (const bad_line& e) {
      return malformed(number, std::string(kind->get_string()) + ": " + e.what);
    }
    t.events.push_back(std::move(v));
  }
  reader.finish(t);
  return std::nullopt;
}

std::optional<agent_error> read_trajectory(std::string_view text, protocol::transcript& t) {
  const auto fail = [](std::string what) {
    return agent_error{make_error_code(agent_errc::malformed_trajectory),
                       "the trajectory " + std::move(what)};
  };
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec) return fail("is not JSON (" + ec.message() + ")");
  auto p = protocol::project(v);
  if (!p) return fail("is not ATIF-v1.x: " + p.error().message());
  if (auto why = missing_required(v.get_object())) return fail("is not ATIF-v1.x: " + *why);
  t.trajectory = std::move(v);
  protocol::project_trajectory(t);
  return std::nullopt;
}

}  // namespace mira::study::detail
