// The CLI's subcommands; each takes the arguments after its name and returns the exit status.
#pragma once

#include <string>
#include <vector>

namespace mmfeed::tools {

// Replaces this process with `python args...` ($MMFEED_PYTHON, else the interpreter this build was
// configured with); returns 127, having said why, when it cannot.
int exec_python(const std::vector<std::string>& args);

int run_fetch(int argc, char** argv);
int run_loader(int argc, char** argv);
int run_inspect(int argc, char** argv);
int run_index(int argc, char** argv);
int run_balance_report(int argc, char** argv);

}  // namespace mmfeed::tools
