#include "dataset/media_uris.h"

#include <simdjson.h>

#include <filesystem>
#include <fstream>

namespace mmfeed::dataset {

Result<std::vector<MediaRef>> media_uris(const std::string& manifest_path) {
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) return Error(ErrorCode::kNotFound, "cannot open manifest", manifest_path);
  const std::string base = std::filesystem::absolute(manifest_path).parent_path().string();
  std::vector<MediaRef> out;
  simdjson::dom::parser parser;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 byte-order mark
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = manifest_path + ":" + std::to_string(line_no);
    simdjson::dom::element doc;
    if (auto err = parser.parse(line).get(doc); err) {
      return Error(ErrorCode::kCorruptData, std::string("malformed JSON line: ") + simdjson::error_message(err), where);
    }
    std::string_view id = "?";
    if (doc["id"].is_string()) id = doc["id"].get_string().value();
    simdjson::dom::array messages;
    if (doc["messages"].get_array().get(messages)) {
      return Error(ErrorCode::kCorruptData, "sample has no \"messages\" array", where + " (sample " + std::string(id) + ")");
    }
    for (simdjson::dom::element message : messages) {
      simdjson::dom::array content;
      if (message["content"].get_array().get(content)) continue;  // string content holds no media
      for (simdjson::dom::element item : content) {
        std::string_view type;
        if (item["type"].get_string().get(type)) continue;
        if (type != "image" && type != "video") continue;
        std::string_view text;
        if (item[type].get_string().get(text)) {
          return Error(ErrorCode::kCorruptData, std::string(type) + " item without a string \"" + std::string(type) + "\"",
                       where + " (sample " + std::string(id) + ")");
        }
        auto uri = storage::parse_uri(text, base);
        if (!uri.ok()) return std::move(uri).error().with_context(where + " (sample " + std::string(id) + ")");
        out.push_back({std::move(uri).value(), std::string(id), line_no});
      }
    }
  }
  return out;
}

}  // namespace mmfeed::dataset
