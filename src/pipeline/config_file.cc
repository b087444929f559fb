// Loader options from flags and config files (include/mmfeed/config_file.h).
#include "mmfeed/config_file.h"

#include <simdjson.h>

#include <toml++/toml.h>

#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mmfeed/json.h"

namespace mmfeed {

namespace {

// Flags that are not `--<option name with dashes>`: the short names the CLI has always taken.
constexpr std::pair<std::string_view, std::string_view> kFlagAliases[] = {{"manifest", "manifests"},
                                                                          {"prefetch", "prefetch_batches"},
                                                                          {"inflight", "fetch_inflight"},
                                                                          {"trace", "trace_path"},
                                                                          {"unordered", "no-ordered"}};

}  // namespace

std::string loader_option_name(std::string_view key) {
  for (const auto& [alias, name] : kFlagAliases) {
    if (key == alias) return std::string(name);
  }
  std::string name(key);
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

const LoaderOptionInfo* find_loader_option(std::string_view name) {
  static const std::vector<LoaderOptionInfo> options = loader_options();
  for (const LoaderOptionInfo& o : options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

namespace {

// An option whose values are text (a path, a name, a choice): a number or a boolean given for
// it is a mistake, not its spelling.
bool takes_text(std::string_view name) {
  const LoaderOptionInfo* o = find_loader_option(name);
  return o != nullptr && (o->type == "str" || o->type == "list[str]" || o->type.find('|') != std::string::npos);
}

bool is_list_option(std::string_view name) {
  const LoaderOptionInfo* o = find_loader_option(name);
  return o != nullptr && o->type.starts_with("list[");
}

}  // namespace

Status apply_loader_option(LoaderConfig& c, std::string_view key, std::string_view value) {
  const std::string name = loader_option_name(key);
  if (find_loader_option(name) == nullptr) {
    return Error(ErrorCode::kInvalidArgument, "unknown option --" + std::string(key));
  }
  return set_loader_option(c, name, value);
}

namespace {

// A config file's entries as (option name, value) pairs: keys with '-' read as '_', numbers and
// booleans as their text, a list (of a list option) as one entry per item.
using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

// A config's `sources`: one table per manifest with its weight and media root (all optional but
// the manifest; weights for every source or none), as manifests, weights and media_root entries.
struct SourceRow {
  std::optional<std::string> manifest, weight, media_root, max_pixels, chat_template;
};

Status add_sources(ConfigEntries& entries, const std::vector<SourceRow>& rows, const std::string& where) {
  bool weighted = false, rooted = false, sized = false, templated = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].manifest)
      return Error(ErrorCode::kInvalidArgument, "names no manifest", where + "[" + std::to_string(i) + "]");
    weighted = weighted || rows[i].weight.has_value();
    rooted = rooted || rows[i].media_root.has_value();
    sized = sized || rows[i].max_pixels.has_value();
    templated = templated || rows[i].chat_template.has_value();
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (weighted && !rows[i].weight) {
      return Error(ErrorCode::kInvalidArgument, "has no weight while others have one: weigh every source, or none",
                   where + "[" + std::to_string(i) + "]");
    }
    entries.emplace_back("manifests", *rows[i].manifest);
    if (weighted) entries.emplace_back("weights", *rows[i].weight);
    if (rooted) entries.emplace_back("media_root", rows[i].media_root.value_or(""));
    if (sized) entries.emplace_back("source_max_pixels", rows[i].max_pixels.value_or("0"));
    if (templated) entries.emplace_back("source_chat_template", rows[i].chat_template.value_or(""));
  }
  return ok_status();
}

// One source's key, or an error naming it.
Status set_source_key(SourceRow& row, std::string_view key, std::string value, const std::string& where) {
  if (key == "manifest") {
    row.manifest = std::move(value);
  } else if (key == "weight") {
    row.weight = std::move(value);
  } else if (key == "media_root" || key == "media-root") {
    row.media_root = std::move(value);
  } else if (key == "max_pixels" || key == "max-pixels") {
    row.max_pixels = std::move(value);
  } else if (key == "chat_template" || key == "chat-template") {
    row.chat_template = std::move(value);
  } else {
    return Error(ErrorCode::kInvalidArgument,
                 "unknown key '" + std::string(key) +
                     "' (a source takes manifest, weight, media_root, max_pixels and chat_template)",
                 where);
  }
  return ok_status();
}

Result<ConfigEntries> read_json_config(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object obj;
  if (auto err = parser.load(path).get(doc); err) {
    return Error(ErrorCode::kInvalidArgument, std::string("config is not JSON: ") + simdjson::error_message(err), path);
  }
  if (doc.get_object().get(obj)) return Error(ErrorCode::kInvalidArgument, "config is not a JSON object", path);
  ConfigEntries entries;
  for (auto [k, v] : obj) {
    const std::string key = loader_option_name(k);
    std::string_view sv;
    simdjson::dom::array list;
    if (key == "sources") {
      const std::string where = path + ": sources";
      if (v.get_array().get(list)) return Error(ErrorCode::kInvalidArgument, "takes a list of sources", where);
      std::vector<SourceRow> rows;
      for (simdjson::dom::element e : list) {
        const std::string at = where + "[" + std::to_string(rows.size()) + "]";
        simdjson::dom::object source;
        if (e.get_object().get(source)) return Error(ErrorCode::kInvalidArgument, "is not an object", at);
        SourceRow& row = rows.emplace_back();
        for (auto [source_key, source_value] : source) {
          std::string_view text;
          std::string value = !source_value.get_string().get(text) ? std::string(text) : simdjson::minify(source_value);
          MMFEED_RETURN_IF_ERROR(set_source_key(row, source_key, std::move(value), at));
        }
      }
      MMFEED_RETURN_IF_ERROR(add_sources(entries, rows, where));
    } else if (!v.get_string().get(sv)) {
      entries.emplace_back(key, std::string(sv));
    } else if (!v.get_array().get(list)) {
      if (!is_list_option(key))
        return Error(ErrorCode::kInvalidArgument, "takes one value, not a list", path + ": " + key);
      for (simdjson::dom::element e : list) {
        if (!e.get_string().get(sv)) {
          entries.emplace_back(key, std::string(sv));
        } else if (e.is_number() && !takes_text(key)) {
          entries.emplace_back(key, simdjson::minify(e));
        } else {
          return Error(ErrorCode::kInvalidArgument, "a list of strings or numbers, not " + simdjson::minify(e),
                       path + ": " + key);
        }
      }
    } else if (takes_text(key)) {
      return Error(ErrorCode::kInvalidArgument, "takes a string, not " + simdjson::minify(v), path + ": " + key);
    } else {
      entries.emplace_back(key, simdjson::minify(v));
    }
  }
  return entries;
}

Result<ConfigEntries> read_toml_config(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return Error(ErrorCode::kInvalidArgument,
                 "config is not TOML: " + std::string(e.description()) + " (line " + std::to_string(at.line) +
                     ", column " + std::to_string(at.column) + ")",
                 path);
  }
  ConfigEntries entries;
  // A value's text: numbers and booleans as written in JSON, strings as they are.
  auto text_of = [](const toml::node& node) -> std::optional<std::string> {
    if (node.is_string()) return *node.value<std::string>();
    if (node.is_integer()) return std::to_string(*node.value<std::int64_t>());
    if (node.is_floating_point()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", *node.value<double>());
      return std::string(text);
    }
    if (node.is_boolean()) return std::string(*node.value<bool>() ? "true" : "false");
    return std::nullopt;
  };
  auto unsupported = [&](const std::string& where) {
    return Error(ErrorCode::kInvalidArgument, "unsupported value (tables and dates are not options)", where);
  };
  auto checked = [&](const std::string& key, const toml::node& node) -> Result<std::string> {
    std::optional<std::string> text = text_of(node);
    if (!text) return unsupported(path + ": " + key);
    if (takes_text(key) && !node.is_string()) {
      return Error(ErrorCode::kInvalidArgument, "takes a string, not " + *text, path + ": " + key);
    }
    return std::move(*text);
  };
  for (auto&& [k, node] : table) {
    const std::string key = loader_option_name(k.str());
    if (key == "sources") {
      const std::string where = path + ": sources";
      const toml::array* list = node.as_array();
      if (list == nullptr) return Error(ErrorCode::kInvalidArgument, "takes a list of sources ([[sources]])", where);
      std::vector<SourceRow> rows;
      for (const toml::node& item : *list) {
        const std::string at = where + "[" + std::to_string(rows.size()) + "]";
        const toml::table* source = item.as_table();
        if (source == nullptr) return Error(ErrorCode::kInvalidArgument, "is not a table", at);
        SourceRow& row = rows.emplace_back();
        for (auto&& [source_key, value] : *source) {
          std::optional<std::string> text = text_of(value);
          if (!text) return unsupported(at + "." + std::string(source_key.str()));
          MMFEED_RETURN_IF_ERROR(set_source_key(row, source_key.str(), std::move(*text), at));
        }
      }
      MMFEED_RETURN_IF_ERROR(add_sources(entries, rows, where));
    } else if (const toml::array* list = node.as_array()) {
      if (!is_list_option(key))
        return Error(ErrorCode::kInvalidArgument, "takes one value, not a list", path + ": " + key);
      for (const toml::node& item : *list) {
        MMFEED_ASSIGN_OR_RETURN(std::string text, checked(key, item));
        entries.emplace_back(key, std::move(text));
      }
    } else {
      MMFEED_ASSIGN_OR_RETURN(std::string text, checked(key, node));
      entries.emplace_back(key, std::move(text));
    }
  }
  return entries;
}

}  // namespace

Status read_loader_config(LoaderConfig& c, const std::string& path) {
  const bool toml = path.size() >= 5 && path.compare(path.size() - 5, 5, ".toml") == 0;
  MMFEED_ASSIGN_OR_RETURN(ConfigEntries entries, toml ? read_toml_config(path) : read_json_config(path));
  for (const auto& [key, value] : entries) {
    Status st = apply_loader_option(c, key, value);
    if (!st.ok()) return std::move(st).error().with_context(path);
  }
  return ok_status();
}

namespace {

// A value as JSON: text, a name, a boolean or a number, or a list of them.
template <class T>
void append_json_value(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    append_json_string(out, value);
  } else if constexpr (std::is_enum_v<T>) {
    append_json_string(out, choice_name(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    out += text;
  } else if constexpr (std::is_integral_v<T>) {
    out += std::to_string(value);
  } else {  // a list
    out += "[";
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i) out += ",";
      append_json_value(out, value[i]);
    }
    out += "]";
  }
}

}  // namespace

std::string changed_options_json(const LoaderConfig& c) {
  static const LoaderConfig defaults;
  std::string out = "{";
  for_each_loader_option([&](const char* name, auto member, const char*) {
    const auto& value = c.*member;
    if (value == defaults.*member) return;
    if (out.size() > 1) out += ",";
    append_json_string(out, name);
    out += ":";
    append_json_value(out, value);
  });
  return out + "}";
}

}  // namespace mmfeed
