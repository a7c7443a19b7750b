// A subject's view of its case (see context.hpp): notifications and the blocking pool.
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/study/context.hpp>

#include "study/request_loop.hpp"

namespace mira::study {

std::string_view run_context::param(std::string_view axis) const noexcept {
  auto it = id_->params.find(std::string(axis));
  return it == id_->params.end() ? std::string_view() : std::string_view(it->second);
}

// Written here rather than through append_json(event_params): `extra` may hold any member.
void run_context::event(std::string_view kind, json::object extra) const {
  std::string f = "{\"method\":\"event\",\"params\":{\"request_id\":";
  f += std::to_string(request_id_);
  for (auto [key, value] : {std::pair<const char*, const std::string*>{"eval", &id_->eval},
                            {"sample", &id_->sample},
                            {"target", &id_->target}}) {
    f += ",\"";
    f += key;
    f += "\":";
    protocol::append_json_string(f, *value);
  }
  if (!id_->params.empty()) {
    f += ",\"params\":{";
    bool first = true;
    for (auto& [k, v] : id_->params) {
      if (!first) f += ',';
      first = false;
      protocol::append_json_string(f, k);
      f += ':';
      protocol::append_json_string(f, v);
    }
    f += '}';
  }
  f += ",\"kind\":";
  protocol::append_json_string(f, kind);
  for (auto& member : extra) {
    f += ',';
    protocol::append_json_string(f, member.key());
    f += ':';
    protocol::append_json_text(f, member.value());
  }
  f += "}}\n";
  loop_->send(std::move(f));
}

void run_context::log(std::string_view message) const {
  protocol::log_params l;
  l.request_id = request_id_;
  l.message = std::string(message);
  std::string params;
  protocol::append_json(params, l);
  std::string f;
  protocol::append_notification_frame(f, "log", params);
  loop_->send(std::move(f));
}

bool run_context::cancelled() const noexcept {
  return control_->cancelled;
}

std::stop_token run_context::stop_token() const {
  return control_->token();
}

boost::asio::any_io_executor run_context::blocking_executor() const {
  return loop_->blocking_executor();
}

}  // namespace mira::study
