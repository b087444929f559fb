// The option table's text forms (include/mmfeed/loader_options.h): what the CLI and config files
// parse, what help screens and the Python docstring print.
#include "mmfeed/loader_options.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace mmfeed {

namespace {

template <class T>
struct ListOf : std::false_type {};
template <class T>
struct ListOf<std::vector<T>> : std::true_type {
  using Item = T;
};

template <class T>
std::string type_of() {
  if constexpr (std::is_enum_v<T>) {
    std::string out;
    for (std::string_view n : Choices<T>::names) out += (out.empty() ? "" : "|") + std::string(n);
    return out;
  } else if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "float";
  } else if constexpr (std::is_integral_v<T>) {
    return "int";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "str";
  } else {
    static_assert(ListOf<T>::value);
    return "list[" + type_of<typename ListOf<T>::Item>() + "]";
  }
}

template <class T>
std::string text_of(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(choice_name(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    std::string out;
    for (std::size_t i = 0; i < value.size(); ++i) out += (i == 0 ? "" : ",") + text_of(value[i]);
    return out;
  }
}

template <class T>
Status parse_into(T& out, std::string_view name, std::string_view text) {
  auto refuse = [&](const std::string& takes) {
    return Error(ErrorCode::kInvalidArgument,
                 std::string(name) + " takes " + takes + ", not '" + std::string(text) + "'");
  };
  if constexpr (std::is_enum_v<T>) {
    const std::optional<T> v = parse_choice<T>(text);
    if (!v) return refuse(choice_list<T>());
    out = *v;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (text != "true" && text != "false") return refuse("true or false");
    out = text == "true";
  } else if constexpr (std::is_floating_point_v<T>) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || std::isnan(v)) return refuse("a number");
    out = static_cast<T>(v);
  } else if constexpr (std::is_integral_v<T>) {
    if (takes_auto(name) && text == "auto") {
      out = 0;
      return ok_status();
    }
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return refuse(std::is_unsigned_v<T> ? "an integer >= 0" : "an integer");
    }
    out = v;
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = std::string(text);
  } else {  // a list: one item more
    typename ListOf<T>::Item item{};
    MMFEED_RETURN_IF_ERROR(parse_into(item, name, text));
    out.push_back(std::move(item));
  }
  return ok_status();
}

}  // namespace

std::vector<LoaderOptionInfo> loader_options() {
  const LoaderConfig defaults;
  std::vector<LoaderOptionInfo> out;
  for_each_loader_option([&](const char* name, auto member, const char* doc) {
    using T = std::remove_cvref_t<decltype(defaults.*member)>;
    out.push_back({name, type_of<T>(), text_of(defaults.*member), doc});
  });
  return out;
}

Status set_loader_option(LoaderConfig& config, std::string_view name, std::string_view text) {
  std::optional<Status> result;
  for_each_loader_option([&](const char* option, auto member, const char*) {
    if (!result && name == option) result = parse_into(config.*member, name, text);
  });
  if (!result) return Error(ErrorCode::kInvalidArgument, "unknown loader option '" + std::string(name) + "'");
  return *result;
}

}  // namespace mmfeed
