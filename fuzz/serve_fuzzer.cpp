// libFuzzer target for what a client's bytes reach in `mira serve` before any handler: the
// request target (split, percent-decoded, routed for each method, run ids checked), the JSON
// bodies of POST /v1/runs and of resume, Last-Event-ID, the bearer check and allow-list entries.
// Invariants: a routed run id is one check_run_id accepts (so no path escapes the results
// directory), every refusal has an error status and a JSON body of the one error shape.
// Build and run (as scripts/fuzz.sh does for wire_fuzzer; the store's file helpers need the
// protocol's JSON text layer):
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -DBOOST_JSON_NO_LIB -Iinclude -Isrc -Ibuild/include fuzz/serve_fuzzer.cpp \
//     src/serve/api.cpp src/serve/error.cpp src/command_line.cpp src/store/files.cpp \
//     src/store/digest.cpp src/protocol/json_text.cpp src/protocol/codec.cpp \
//     src/protocol/json_scan.cpp src/protocol/trajectory.cpp src/protocol/text_decoder.cpp \
//     src/protocol/envelope.cpp build-fuzz/boost_json.cpp -o build-fuzz/serve_fuzzer
//   build-fuzz/serve_fuzzer -max_total_time=60 -max_len=4096 build-fuzz/corpus-serve
//   fuzz/corpus/serve
#include <mira/serve/server.hpp>
#include "serve/api.hpp"

#include <boost/json/parse.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace mira::serve;

void check_error(const api_error& e) {
  if (e.status < 400 || e.status > 599) std::abort();
  boost::system::error_code ec;
  auto v = boost::json::parse(error_body(e), ec);
  if (ec || !v.is_object() || !v.as_object().contains("error")) std::abort();
  auto& err = v.at("error").as_object();
  if (!err.contains("code") || !err.contains("message") || !err.contains("details")) std::abort();
}

void route_target(std::string_view target) {
  auto t = parse_target(target);
  if (!t) return check_error(t.error());
  if (t->path.find('\0') != std::string::npos) std::abort();
  for (auto method : {"GET", "POST", "DELETE"}) {
    auto m = match_route(method, t->path);
    if (!m) {
      check_error(m.error());
      continue;
    }
    if (!m->spec) std::abort();
    if (!m->run_id.empty()) {
      if (check_run_id(m->run_id)) std::abort();
      if (m->run_id.find('/') != std::string::npos || m->run_id.find("..") != std::string::npos)
        std::abort();
    }
  }
  (void)t->param("limit");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  route_target(in);
  for (auto type : {"application/json", "application/json; charset=utf-8", "text/plain"}) {
    auto r = decode_run_request(type, in);
    if (r) {
      (void)to_policy(r->options);
      if (r->study.empty()) std::abort();
    } else {
      check_error(r.error());
    }
    auto resume = decode_resume_request(type, in);
    if (!resume) check_error(resume.error());
  }
  (void)parse_last_event_id(in);
  (void)bearer_matches(in, "fuzz-token-0123456789");
  if (auto e = parse_study_entry(in); e && (e->argv.empty() || e->name.empty())) std::abort();
  idempotency_keys keys;
  if (idempotency_keys::valid_key(in)) {
    std::string key(in);
    keys.begin(key, in);
    if (keys.begin(key, "other").what != idempotency_keys::outcome::conflict && in != "other")
      std::abort();
  }
  return 0;
}
