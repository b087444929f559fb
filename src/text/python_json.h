// JSON values written as Python's json.dumps(value, ensure_ascii=False) writes them, which is
// what the chat templates' `tojson` filter produces under transformers: separators ", " and
// ": ", keys in the order given, integers exact, floats as Python's repr ("1.0", "1e-05",
// "1e+16"), strings with \" \\ \n \r \t \b \f escaped, other control characters as \u00XX and
// everything else (non-ASCII included) as is.
//
// Example:
//   python_json(R"({"b":[1,2.50,true],"a":null})")  // {"b": [1, 2.5, true], "a": null}
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "mmfeed/error.h"

namespace mmfeed::text {

// Appends `value` to `out`. Written once here for every JSON value a template serialises.
void append_python_json(std::string& out, simdjson::dom::element value);

// Appends what Jinja's `|string` writes for `value` as Python's json.loads holds it (str()): a
// string as it is, an integer in decimal, a float as its repr, True, False, None; a list or an
// object as append_python_json (the templates write those with tojson).
void append_python_str(std::string& out, simdjson::dom::element value);

// What a JSON value is, in Python's words ("a list", "an object", "a number", "a string",
// "a boolean", "null"), for error messages that say what was found instead of what was expected.
std::string_view json_kind(simdjson::dom::element value);

// One JSON text re-serialised; kCorruptData when it does not parse. Numbers simdjson cannot hold
// exactly (integers beyond 64 bits, floats beyond double range) do not parse.
Result<std::string> python_json(std::string_view json);

}  // namespace mmfeed::text
