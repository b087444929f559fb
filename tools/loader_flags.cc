#include "tools/loader_flags.h"

#include <string_view>

#include "mmfeed/config_file.h"
#include "mmfeed/loader_options.h"

namespace mmfeed::tools {

namespace {

bool is_bool_option(std::string_view name) {
  const LoaderOptionInfo* o = find_loader_option(name);
  return o != nullptr && o->type == "bool";
}

}  // namespace

std::optional<Status> apply_loader_flag(LoaderConfig& config, int argc, char** argv, int& i) {
  const std::string arg = argv[i];
  if (arg.rfind("--", 0) != 0) return std::nullopt;
  if (arg == "--config") {
    if (i + 1 >= argc) return Error(ErrorCode::kInvalidArgument, arg + " needs a value");
    return read_loader_config(config, argv[++i]);
  }
  std::string name = loader_option_name(arg.substr(2));
  for (char& ch : name) ch = ch == '-' ? '_' : ch;  // an alias may name "no-ordered"
  if (is_bool_option(name)) {                       // --mrope, or --mrope true|false
    const bool valued =
        i + 1 < argc && (std::string_view(argv[i + 1]) == "true" || std::string_view(argv[i + 1]) == "false");
    return apply_loader_option(config, name, valued ? argv[++i] : "true");
  }
  if (name.rfind("no_", 0) == 0 && is_bool_option(name.substr(3))) {
    return apply_loader_option(config, name.substr(3), "false");
  }
  if (find_loader_option(name) == nullptr) return std::nullopt;
  if (i + 1 >= argc) return Error(ErrorCode::kInvalidArgument, arg + " needs a value");
  return apply_loader_option(config, name, argv[++i]);
}

std::string loader_flags_usage() {
  std::string out =
      "  --config FILE\n"
      "      loader options as a JSON object or a TOML table (*.toml): the options below, with _ or -;\n"
      "      later flags override it; a blend's `sources`: a list of {manifest, weight, media_root,\n"
      "      max_pixels, chat_template} tables\n";
  for (const LoaderOptionInfo& o : loader_options()) {
    std::string flag = "--" + o.name;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    const std::string value = o.type == "bool" ? "" : " " + (o.type.find('|') != std::string::npos ? o.type : "VALUE");
    out += "  " + flag + value + "\n      " + o.doc +
           (o.default_text.empty() ? "" : " (default " + o.default_text + ")") + "\n";
  }
  return out;
}

}  // namespace mmfeed::tools
