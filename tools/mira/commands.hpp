// The `mira` subcommands, each taking the arguments after its name and returning the exit code.
#pragma once

#include <string>
#include <vector>

namespace mira::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_score(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_store(const std::vector<std::string>& args);
int cmd_merge(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_serve(const std::vector<std::string>& args);
int cmd_view(const std::vector<std::string>& args);
int cmd_doctor(const std::vector<std::string>& args);

}  // namespace mira::cli
