#include "text/python_json.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "mmfeed/json.h"

namespace mmfeed::text {

namespace {

// Python's float repr: the shortest digits that round-trip; positional when the decimal
// exponent is in [-4, 16), with ".0" added to integral values; otherwise d[.ddd]e[+-]XX.
void append_double(std::string& out, double x) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  if (ec != std::errc()) std::abort();                             // 64 bytes hold any double
  std::string_view sci(buf, static_cast<std::size_t>(end - buf));  // "-d.ddde+XX", shortest
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const std::size_t e = sci.find('e');
  std::string digits(1, sci[0]);
  if (e > 1) digits += sci.substr(2, e - 2);
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  if (negative) out += '-';
  const int decpt = exponent + 1;  // x = 0.d1d2... * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<std::size_t>(decpt));
    }
    return;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += exponent < 0 ? "e-" : "e+";
  const int magnitude = exponent < 0 ? -exponent : exponent;
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
}

}  // namespace

std::string_view json_kind(simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::ARRAY: return "a list";
    case simdjson::dom::element_type::OBJECT: return "an object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: return "a number";
    case simdjson::dom::element_type::STRING: return "a string";
    case simdjson::dom::element_type::BOOL: return "a boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "an unknown JSON value";
}

void append_python_json(std::string& out, simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::ARRAY: {
      out += '[';
      bool first = true;
      const simdjson::dom::array array = value.get_array().value_unsafe();
      for (simdjson::dom::element item : array) {
        if (!first) out += ", ";
        first = false;
        append_python_json(out, item);
      }
      out += ']';
      return;
    }
    case simdjson::dom::element_type::OBJECT: {
      out += '{';
      bool first = true;
      const simdjson::dom::object object = value.get_object().value_unsafe();
      for (simdjson::dom::key_value_pair field : object) {
        if (!first) out += ", ";
        first = false;
        append_json_string(out, field.key);
        out += ": ";
        append_python_json(out, field.value);
      }
      out += '}';
      return;
    }
    case simdjson::dom::element_type::INT64: out += std::to_string(value.get_int64().value_unsafe()); return;
    case simdjson::dom::element_type::UINT64: out += std::to_string(value.get_uint64().value_unsafe()); return;
    case simdjson::dom::element_type::DOUBLE: append_double(out, value.get_double().value_unsafe()); return;
    case simdjson::dom::element_type::STRING: append_json_string(out, value.get_string().value_unsafe()); return;
    case simdjson::dom::element_type::BOOL: out += value.get_bool().value_unsafe() ? "true" : "false"; return;
    case simdjson::dom::element_type::NULL_VALUE: out += "null"; return;
  }
}

void append_python_str(std::string& out, simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::STRING: out += value.get_string().value_unsafe(); return;
    case simdjson::dom::element_type::BOOL: out += value.get_bool().value_unsafe() ? "True" : "False"; return;
    case simdjson::dom::element_type::NULL_VALUE: out += "None"; return;
    default: append_python_json(out, value); return;
  }
}

Result<std::string> python_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error(ErrorCode::kCorruptData, std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  std::string out;
  append_python_json(out, doc);
  return out;
}

}  // namespace mmfeed::text
