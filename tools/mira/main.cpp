// The `mira` executable.
#include "cli.hpp"

int main(int argc, char** argv) {
  return mira::cli::main({argv + 1, argv + argc});
}
