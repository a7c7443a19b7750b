// What the pool's starts and restart_study say about a study, so that both say it alike: who it
// is, and that it missed its time limit for initialize.
#pragma once

#include <mira/protocol/types.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace mira::detail {

// 'name' version V (protocol P)
inline std::string identity_of(const protocol::initialize_result& r) {
  return "'" + r.study + "' version " + (r.study_version.empty() ? "(none)" : r.study_version) +
         " (protocol " + r.protocol_version + ")";
}

// "did not <what> within 0.5 s"
inline std::string missed(const char* what, std::chrono::milliseconds limit) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", std::chrono::duration<double>(limit).count());
  return "did not " + std::string(what) + " within " + secs + " s";
}

// "did not answer initialize within 0.5 s"
inline std::string missed_initialize(std::chrono::milliseconds limit) {
  return missed("answer initialize", limit);
}

}  // namespace mira::detail
