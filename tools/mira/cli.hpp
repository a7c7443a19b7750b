// Entry point of the `mira` command line, separate from main() so tests can call it.
#pragma once

#include <string>
#include <vector>

namespace mira::cli {

/// Runs one command line (without the program name); returns the process exit code.
int main(const std::vector<std::string>& args);

}  // namespace mira::cli
