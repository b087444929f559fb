// Writing JSON by hand, safely: the metrics registry and the trace writer build their
// output with these instead of a JSON library.
#pragma once

#include <string>
#include <string_view>

namespace mmfeed {

// Appends `s` to `out` as a JSON string literal (quotes and escapes included), escaped as
// Python's json.dumps(ensure_ascii=False) escapes it (\" \\ \n \r \t \b \f, other control
// characters \u00xx); bytes that are not well-formed UTF-8 become U+FFFD so the output always
// parses.
void append_json_string(std::string& out, std::string_view s);

}  // namespace mmfeed
