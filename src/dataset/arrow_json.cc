#include "dataset/arrow_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>
#include <utility>

#include "mmfeed/json.h"

namespace mmfeed::dataset {

namespace {

template <typename A>
void append_number(std::string& out, const arrow::Array& a, std::int64_t i) {
  const auto v = static_cast<const A&>(a).Value(i);
  if constexpr (std::is_floating_point_v<decltype(v)>) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

}  // namespace

namespace {

// A string value, unless even unescaped it would pass `limit`.
bool append_string(std::string& out, std::string_view v, std::size_t limit) {
  if (v.size() > limit - std::min(limit, out.size())) return false;
  append_json_string(out, v);
  return out.size() <= limit;
}

}  // namespace

bool append_json_value(std::string& out, const arrow::Array& a, std::int64_t i, std::size_t limit) {
  if (out.size() > limit) return false;
  if (a.IsNull(i)) {
    out += "null";
    return true;
  }
  switch (a.type_id()) {
    case arrow::Type::BOOL: out += static_cast<const arrow::BooleanArray&>(a).Value(i) ? "true" : "false"; return true;
    case arrow::Type::INT8: append_number<arrow::Int8Array>(out, a, i); return true;
    case arrow::Type::INT16: append_number<arrow::Int16Array>(out, a, i); return true;
    case arrow::Type::INT32: append_number<arrow::Int32Array>(out, a, i); return true;
    case arrow::Type::INT64: append_number<arrow::Int64Array>(out, a, i); return true;
    case arrow::Type::UINT8: append_number<arrow::UInt8Array>(out, a, i); return true;
    case arrow::Type::UINT16: append_number<arrow::UInt16Array>(out, a, i); return true;
    case arrow::Type::UINT32: append_number<arrow::UInt32Array>(out, a, i); return true;
    case arrow::Type::UINT64: append_number<arrow::UInt64Array>(out, a, i); return true;
    case arrow::Type::FLOAT: append_number<arrow::FloatArray>(out, a, i); return true;
    case arrow::Type::DOUBLE: append_number<arrow::DoubleArray>(out, a, i); return true;
    case arrow::Type::STRING: return append_string(out, static_cast<const arrow::StringArray&>(a).GetView(i), limit);
    case arrow::Type::LARGE_STRING:
      return append_string(out, static_cast<const arrow::LargeStringArray&>(a).GetView(i), limit);
    case arrow::Type::STRING_VIEW:
      return append_string(out, static_cast<const arrow::StringViewArray&>(a).GetView(i), limit);
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST: {
      std::int64_t begin = 0, end = 0;
      std::shared_ptr<arrow::Array> values;
      if (a.type_id() == arrow::Type::LIST) {
        const auto& l = static_cast<const arrow::ListArray&>(a);
        begin = l.value_offset(i), end = begin + l.value_length(i), values = l.values();
      } else if (a.type_id() == arrow::Type::LARGE_LIST) {
        const auto& l = static_cast<const arrow::LargeListArray&>(a);
        begin = l.value_offset(i), end = begin + l.value_length(i), values = l.values();
      } else {
        const auto& l = static_cast<const arrow::FixedSizeListArray&>(a);
        begin = l.value_offset(i), end = begin + l.value_length(i), values = l.values();
      }
      out += '[';
      for (std::int64_t k = begin; k < end; ++k) {
        if (k > begin) out += ',';
        if (!append_json_value(out, *values, k, limit)) return false;
      }
      out += ']';
      return true;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      out += '{';
      for (int f = 0; f < s.num_fields(); ++f) {
        if (f > 0) out += ',';
        append_json_string(out, s.struct_type()->field(f)->name());
        out += ':';
        if (!append_json_value(out, *s.field(f), i, limit)) return false;
      }
      out += '}';
      return true;
    }
    case arrow::Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(a);
      return append_json_value(out, *d.dictionary(), d.GetValueIndex(i), limit);
    }
    default: out += "null"; return true;
  }
}

std::uint64_t written_string_bytes(const arrow::Array& a) {
  switch (a.type_id()) {
    case arrow::Type::STRING:
      return static_cast<std::uint64_t>(static_cast<const arrow::StringArray&>(a).total_values_length());
    case arrow::Type::LARGE_STRING:
      return static_cast<std::uint64_t>(static_cast<const arrow::LargeStringArray&>(a).total_values_length());
    case arrow::Type::LIST: return written_string_bytes(*static_cast<const arrow::ListArray&>(a).values());
    case arrow::Type::LARGE_LIST: return written_string_bytes(*static_cast<const arrow::LargeListArray&>(a).values());
    case arrow::Type::FIXED_SIZE_LIST:
      return written_string_bytes(*static_cast<const arrow::FixedSizeListArray&>(a).values());
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      std::uint64_t total = 0;
      for (int f = 0; f < s.num_fields(); ++f) total += written_string_bytes(*s.field(f));
      return total;
    }
    case arrow::Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(a);
      const arrow::Array& values = *d.dictionary();
      if (values.type_id() != arrow::Type::STRING && values.type_id() != arrow::Type::LARGE_STRING) return 0;
      std::uint64_t total = 0;
      for (std::int64_t i = 0; i < d.length(); ++i) {
        if (d.IsNull(i)) continue;
        const std::int64_t k = d.GetValueIndex(i);
        total += values.type_id() == arrow::Type::STRING
                     ? static_cast<std::uint64_t>(static_cast<const arrow::StringArray&>(values).value_length(k))
                     : static_cast<std::uint64_t>(static_cast<const arrow::LargeStringArray&>(values).value_length(k));
      }
      return total;
    }
    default: return 0;
  }
}

// Text of a string column that is JSON (a conversation stored as a JSON string), else nullopt.
std::optional<std::string_view> json_text_of(const arrow::Array& a, std::int64_t i) {
  if (a.IsNull(i)) return std::nullopt;
  if (a.type_id() == arrow::Type::DICTIONARY) {
    const auto& d = static_cast<const arrow::DictionaryArray&>(a);
    return json_text_of(*d.dictionary(), d.GetValueIndex(i));
  }
  std::string_view v;
  if (a.type_id() == arrow::Type::STRING) {
    v = static_cast<const arrow::StringArray&>(a).GetView(i);
  } else if (a.type_id() == arrow::Type::LARGE_STRING) {
    v = static_cast<const arrow::LargeStringArray&>(a).GetView(i);
  } else {
    return std::nullopt;
  }
  const std::size_t first = v.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (v[first] != '[' && v[first] != '{')) return std::nullopt;
  return v;
}

namespace {

// A field's type, or a dictionary's value type (strings stored by dictionary are read as one).
arrow::Type::type value_type_id(const arrow::DataType& t) {
  return t.id() == arrow::Type::DICTIONARY ? static_cast<const arrow::DictionaryType&>(t).value_type()->id() : t.id();
}

bool is_image_struct(const arrow::DataType& t) {
  if (t.id() != arrow::Type::STRUCT || t.num_fields() != 2) return false;
  const auto& s = static_cast<const arrow::StructType&>(t);
  const auto bytes = s.GetFieldByName("bytes"), path = s.GetFieldByName("path");
  if (!bytes || !path) return false;
  const arrow::Type::type b = value_type_id(*bytes->type()), p = value_type_id(*path->type());
  return (b == arrow::Type::BINARY || b == arrow::Type::LARGE_BINARY) &&
         (p == arrow::Type::STRING || p == arrow::Type::LARGE_STRING);
}

}  // namespace

ImageColumn image_column(const arrow::DataType& t) {
  if (is_image_struct(t)) return ImageColumn::kOne;
  if ((t.id() == arrow::Type::LIST || t.id() == arrow::Type::LARGE_LIST) &&
      is_image_struct(*static_cast<const arrow::BaseListType&>(t).value_type())) {
    return ImageColumn::kList;
  }
  return ImageColumn::kNone;
}

RowImages row_images(const arrow::Array& a, ImageColumn kind, std::int64_t row) {
  if (kind != ImageColumn::kList) {
    return {static_cast<const arrow::StructArray*>(&a), row, a.IsNull(row) ? 0 : 1};
  }
  const bool large = a.type_id() == arrow::Type::LARGE_LIST;
  const arrow::Array* values = large ? static_cast<const arrow::LargeListArray&>(a).values().get()
                                     : static_cast<const arrow::ListArray&>(a).values().get();
  if (a.IsNull(row)) return {static_cast<const arrow::StructArray*>(values), 0, 0};
  return {static_cast<const arrow::StructArray*>(values),
          large ? static_cast<const arrow::LargeListArray&>(a).value_offset(row)
                : static_cast<const arrow::ListArray&>(a).value_offset(row),
          large ? static_cast<const arrow::LargeListArray&>(a).value_length(row)
                : static_cast<const arrow::ListArray&>(a).value_length(row)};
}

bool is_conversation_column(std::string_view name) {
  return name == "messages" || name == "conversations" || name == "conversation";
}

Status JsonRows::end_row(std::string& out, std::size_t start, std::size_t row_limit, ShardSample sample,
                         const std::string& where) const {
  out += '}';
  if (out.size() > row_limit || !pool.charge(static_cast<std::int64_t>(out.size() - start))) return too_large(where);
  out += '\n';
  const std::size_t length = out.size() - 1 - start;
  if (length > UINT32_MAX) {
    return Error(ErrorCode::kResourceExhausted, "row of " + std::to_string(length) + " bytes", where);
  }
  lines.push_back({start, static_cast<std::uint32_t>(length), manifest, m.samples.size()});
  m.samples.push_back(std::move(sample));
  return ok_status();
}

Error JsonRows::too_large(const std::string& where) const {
  return Error(
      ErrorCode::kResourceExhausted,
      "its rows written as JSON pass max_manifest_bytes (" + std::to_string(limit) + "); split it, or raise the limit",
      where);
}

}  // namespace mmfeed::dataset
