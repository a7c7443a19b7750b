// Test helper: how many requests the fake provider server got, per path (its /__stats).
#pragma once

#include <mira/models/http.hpp>

#include "common/run_co.hpp"
#include "models/fake_server.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

namespace mira::test {

inline boost::json::object request_counts(const provider_fixture& f) {
  models::client c;
  models::http_request r;
  r.method = "GET";
  r.url = f.url("/__stats");
  auto body = run_co([&](boost::asio::io_context&) -> boost::asio::awaitable<std::string> {
    auto got = co_await c.request(r);
    co_return got ? got->body : std::string("{}");
  });
  return boost::json::parse(body).at("paths").as_object();
}

}  // namespace mira::test
