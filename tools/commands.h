// The CLI's subcommands; each takes the arguments after its name and returns the exit status.
#pragma once

namespace mmfeed::tools {

int run_fetch(int argc, char** argv);
int run_loader(int argc, char** argv);
int run_inspect(int argc, char** argv);

}  // namespace mmfeed::tools
