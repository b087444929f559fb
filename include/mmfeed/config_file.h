// Loader options from text: the flags of `mmfeed run` and config files (a JSON object, or a TOML
// table in a *.toml file), read by the same code for the CLI and for Python
// (mmfeed.read_config), through the one option table (mmfeed/loader_options.h).
//
// A config file holds options by name (with _ or -), numbers and booleans as themselves, a list
// option as a list; a blend may name its manifests as `sources`, one table per manifest with its
// manifest and, optionally, weight, media_root, max_pixels and chat_template (weights for every
// source or none).
//
// Example (run.toml):
//   batch_size = 16
//   tokenizer = "tokenizer.json"
//   [[sources]]
//   manifest = "a.jsonl"
//   weight = 0.7
//   [[sources]]
//   manifest = "b.jsonl"
//   weight = 0.3
//
//   LoaderConfig c;
//   MMFEED_RETURN_IF_ERROR(read_loader_config(c, "run.toml"));
#pragma once

#include <string>
#include <string_view>

#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"

namespace mmfeed {

// The option a flag or config key names: '-' read as '_' ("batch-size": "batch_size"), and the
// short names the CLI has always taken (manifest, prefetch, inflight, trace; "unordered" is
// "no-ordered").
std::string loader_option_name(std::string_view key);

// The option table's row for `name`, or null.
const LoaderOptionInfo* find_loader_option(std::string_view name);

// Sets the option `key` names (loader_option_name) from its text (set_loader_option); an unknown
// one is kInvalidArgument, "unknown option --key".
Status apply_loader_option(LoaderConfig& config, std::string_view key, std::string_view text);

// Sets the options of the config file at `path` in `config`, in the file's order; an error names
// the file and the key.
Status read_loader_config(LoaderConfig& config, const std::string& path);

// The options of `config` that differ from LoaderConfig{}, as a JSON object of option names and
// values (what Python's mmfeed.Loader takes as keywords).
std::string changed_options_json(const LoaderConfig& config);

}  // namespace mmfeed
