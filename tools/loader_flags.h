// Loader options on the command line, for every subcommand that opens a Loader (run, inspect):
// one parser, so that a flag means the same wherever it is given.
//
// Example:
//   for (int i = 0; i < argc; ++i) {
//     if (auto st = apply_loader_flag(config, argc, argv, i)) { if (!st->ok()) ...; continue; }
//     ...  // the subcommand's own flags and arguments
//   }
#pragma once

#include <optional>
#include <string>

#include "mmfeed/error.h"
#include "mmfeed/loader.h"

namespace mmfeed::tools {

// The loader option at argv[i], if it is one: --name VALUE (with _ or -, or an alias such as
// --manifest), a yes/no option as --name, --name true|false or --no-name, or --config FILE (a
// config file's options, which later flags override); `i` is advanced past the value it read. nullopt when argv[i]
// names no loader option; an error for a bad value or a missing one.
std::optional<Status> apply_loader_flag(LoaderConfig& config, int argc, char** argv, int& i);

// --config, then one line per loader option of the option table: "  --name VALUE\n      doc (default ...)".
std::string loader_flags_usage();

}  // namespace mmfeed::tools
