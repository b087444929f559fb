// One stage in one file of about 710 lines, on purpose: every format's reader shares the same
// path-naming helpers and the listed-media placement (the audio items and three kinds of listed
// media included).
//
// Conversations read from a manifest line: the Qwen/OpenAI "messages" form, LLaVA and ShareGPT
// "conversations", tool calls, reasoning and the sample's tools, normalised to one Conversation;
// errors name the JSON path at fault. Rendering and encoding are in chat.cc.
#include "text/conversation.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "text/python_json.h"

namespace mmfeed::text {

namespace {

Error bad(const std::string& message) { return Error(ErrorCode::kCorruptData, message); }

constexpr std::string_view kRoles = R"("system", "user", "assistant" or "tool")";
constexpr std::string_view kSpeakers =
    R"("human", "gpt", "user", "assistant", "model", "system", "tool", "function" or "observation")";

bool known_role(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

// LLaVA / ShareGPT speaker names (kSpeakers) to roles.
std::optional<std::string> role_of_speaker(std::string_view from) {
  if (from == "human" || from == "user") return "user";
  if (from == "gpt" || from == "assistant" || from == "model") return "assistant";
  if (from == "system") return "system";
  if (from == "tool" || from == "function" || from == "observation") return "tool";
  return std::nullopt;
}

// The string at `path`, or an error naming the path and what it holds instead.
Result<std::string_view> as_string(simdjson::dom::element e, const std::string& path, std::string_view what = {}) {
  std::string_view s;
  if (!e.get_string().get(s)) return s;
  return bad(path + " must be a string" + (what.empty() ? "" : " (" + std::string(what) + ")") + ", got " +
             std::string(json_kind(e)));
}

// The sample's "id": a string, or an integer written in decimal. nullopt when absent, empty or
// of another type.
std::optional<std::string> id_of(simdjson::dom::element doc) {
  std::string_view id;
  std::int64_t numeric_id = 0;
  if (!doc["id"].get_string().get(id)) return id.empty() ? std::nullopt : std::optional<std::string>(id);
  if (!doc["id"].get_int64().get(numeric_id)) return std::to_string(numeric_id);
  return std::nullopt;
}

// The URIs under `key`: a string or a list of strings (LLaVA's "image" may be either).
Result<std::vector<std::string>> uri_list(simdjson::dom::element e, std::string_view key) {
  std::vector<std::string> out;
  std::string_view s;
  simdjson::dom::array a;
  if (!e.get_string().get(s)) {
    out.emplace_back(s);
  } else if (!e.get_array().get(a)) {
    std::size_t index = 0;
    for (simdjson::dom::element x : a) {
      MMFEED_ASSIGN_OR_RETURN(std::string_view uri,
                              as_string(x, std::string(key) + "[" + std::to_string(index++) + "]", "a URI"));
      out.emplace_back(uri);
    }
  } else {
    return bad(std::string(key) + " must be a URI or a list of URIs, got " + std::string(json_kind(e)));
  }
  return out;
}

// A video item's keys at `where`: numbers, or null for absent. qwen-vl-utils' fixed frame size
// (resized_height/resized_width) is refused: it bypasses the pixel budgets the batch is planned by.
Result<VideoKeys> video_keys(simdjson::dom::object o, const std::string& where) {
  VideoKeys keys;
  const std::pair<const char*, std::optional<double>*> fields[] = {
      {"nframes", &keys.nframes},          {"fps", &keys.fps},
      {"min_frames", &keys.min_frames},    {"max_frames", &keys.max_frames},
      {"video_start", &keys.video_start},  {"video_end", &keys.video_end},
      {"min_pixels", &keys.min_pixels},    {"max_pixels", &keys.max_pixels},
      {"total_pixels", &keys.total_pixels}};
  simdjson::dom::element e;
  for (const auto& [key, slot] : fields) {
    if (o[key].get(e) || e.is_null()) continue;
    double value = 0;
    if (e.get_double().get(value)) {
      return bad(where + "." + key + " must be a number, got " + std::string(json_kind(e)));
    }
    *slot = value;
  }
  for (const char* key : {"resized_height", "resized_width"}) {
    if (!o[key].get(e)) {
      return Error(ErrorCode::kUnsupported, where + "." + key +
                                                ": a fixed frame size is not supported; "
                                                "bound the frames with max_pixels or total_pixels instead");
    }
  }
  return keys;
}

// An audio item's crop keys at `where` (null reads as absent).
Result<AudioKeys> audio_keys(simdjson::dom::object o, const std::string& where) {
  AudioKeys keys;
  simdjson::dom::element e;
  for (const auto& [key, slot] :
       {std::pair{"audio_start", &keys.audio_start}, std::pair{"audio_end", &keys.audio_end}}) {
    if (o[key].get(e) || e.is_null()) continue;
    double value = 0;
    if (e.get_double().get(value))
      return bad(where + "." + key + " must be a number of seconds, got " + std::string(json_kind(e)));
    *slot = value;
  }
  return keys;
}

// qwen-vl-utils' per-image size keys are refused, not ignored (issue 31): every image is sized
// by the loader's own min_pixels/max_pixels, which the batch memory is planned from, and the
// image path has no per-item bounds to honour them with. Null reads as absent, as for videos.
Status refuse_image_size_keys(simdjson::dom::object o, const std::string& where) {
  for (const char* key : {"min_pixels", "max_pixels", "resized_height", "resized_width"}) {
    if (simdjson::dom::element e; !o[key].get(e) && !e.is_null()) {
      return Error(ErrorCode::kUnsupported,
                   where + "." + key +
                       ": per-image sizes are not supported; every image is "
                       "sized by the loader's min_pixels and max_pixels (remove the key, or set "
                       "those)");
    }
  }
  return ok_status();
}

// One item of a message's content list at `where` ("messages[1].content[0]").
Result<ContentItem> parse_item(simdjson::dom::element item, const std::string& where) {
  simdjson::dom::object o;
  if (item.get_object().get(o)) {
    return bad(where + " must be an object (a text, image, video or audio item), got " + std::string(json_kind(item)));
  }
  std::string_view type;  // stays empty when absent or not a string: the keys decide then
  if (o["type"].get_string().get(type) != simdjson::SUCCESS) type = {};
  // A key set to null is absent: a table's rows (Parquet, Arrow) carry every item's keys.
  simdjson::dom::element field;
  auto has = [&](const char* key) { return !o[key].get(field) && !field.is_null(); };
  std::optional<std::string> media_text;  // a media item's own "text" (see ContentItem)
  if ((has("image") || has("image_url") || has("video")) && has("text")) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view text, as_string(field, where + ".text"));
    media_text = std::string(text);
  }
  if (has("image") || has("image_url")) {
    MMFEED_RETURN_IF_ERROR(refuse_image_size_keys(o, where));
  }
  if (has("image")) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view uri, as_string(field, where + ".image", "the image's URI"));
    return ContentItem{ContentItem::Type::kImage, std::string(uri), media_text, {}, {}};
  }
  if (has("image_url")) {  // OpenAI's {"image_url": {"url": ...}}, or the URI itself
    std::string_view uri;
    if (!field.get_string().get(uri) || !field["url"].get_string().get(uri)) {
      return ContentItem{ContentItem::Type::kImage, std::string(uri), media_text, {}, {}};
    }
    return bad(where + ".image_url must be a URI or an object with a string \"url\", got " +
               std::string(json_kind(field)));
  }
  if (has("video")) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view uri, as_string(field, where + ".video", "the video's URI"));
    ContentItem video{ContentItem::Type::kVideo, std::string(uri), media_text, {}, {}};
    MMFEED_ASSIGN_OR_RETURN(video.video, video_keys(o, where));
    return video;
  }
  if (has("audio") || has("audio_url")) {  // qwen-omni-utils: ele.get("audio") or ele.get("audio_url")
    const char* key = has("audio") ? "audio" : "audio_url";
    MMFEED_ASSIGN_OR_RETURN(std::string_view uri,
                            as_string(o[key].value_unsafe(), where + "." + key, "the audio's URI"));
    ContentItem audio{ContentItem::Type::kAudio, std::string(uri), std::nullopt, {}, {}};
    MMFEED_ASSIGN_OR_RETURN(audio.audio, audio_keys(o, where));
    return audio;
  }
  // {"type": "image"} alone (TRL's and transformers' processor format), {"type": "video"} or
  // {"type": "audio"}: the sample's next listed medium of that kind takes its place; the caller
  // fills it in.
  if (type == "image" || type == "video" || type == "audio") {
    ContentItem listed{type == "image"   ? ContentItem::Type::kImage
                       : type == "video" ? ContentItem::Type::kVideo
                                         : ContentItem::Type::kAudio,
                       "",
                       std::nullopt,
                       {},
                       {}};
    if (type == "audio") {
      MMFEED_ASSIGN_OR_RETURN(listed.audio, audio_keys(o, where));
    }
    return listed;
  }
  if (!o["text"].get(field)) {  // null here is named: a text item needs its text
    MMFEED_ASSIGN_OR_RETURN(std::string_view text, as_string(field, where + ".text"));
    ContentItem text_item{ContentItem::Type::kText, std::string(text), std::nullopt, {}, {}};
    text_item.untyped = type != "text";
    return text_item;
  }
  return bad(where + " has no \"text\", \"image\", \"video\" or \"audio\"" +
             (type.empty() ? std::string() : " (type '" + std::string(type) + "')"));
}

// Python's truthiness of a JSON value, which Jinja's `if x` applies.
bool truthy(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: return e.get_array().value_unsafe().size() > 0;
    case simdjson::dom::element_type::OBJECT: return e.get_object().value_unsafe().size() > 0;
    case simdjson::dom::element_type::INT64: return e.get_int64().value_unsafe() != 0;
    case simdjson::dom::element_type::UINT64: return e.get_uint64().value_unsafe() != 0;
    case simdjson::dom::element_type::DOUBLE: return e.get_double().value_unsafe() != 0;
    case simdjson::dom::element_type::STRING: return !e.get_string().value_unsafe().empty();
    case simdjson::dom::element_type::BOOL: return e.get_bool().value_unsafe();
    case simdjson::dom::element_type::NULL_VALUE: return false;
  }
  return false;
}

// One tool call at `at`: {"name", "arguments"}, or wrapped in a non-empty {"function": {...}}.
Result<ToolCall> parse_call(simdjson::dom::element call, std::string at) {
  simdjson::dom::object o;
  if (call.get_object().get(o)) {
    return bad(at + " must be an object with \"name\" and \"arguments\" (or \"function\"), got " +
               std::string(json_kind(call)));
  }
  if (simdjson::dom::element function; !o["function"].get(function) && truthy(function)) {
    if (function.get_object().get(o)) {
      return bad(at + ".function must be an object with \"name\" and \"arguments\", got " +
                 std::string(json_kind(function)));
    }
    at += ".function";
  }
  ToolCall tc;
  simdjson::dom::element field;
  if (o["name"].get(field)) return bad(at + " has no \"name\" (expected the function's name)");
  MMFEED_ASSIGN_OR_RETURN(std::string_view name, as_string(field, at + ".name", "the function's name"));
  tc.name = std::string(name);
  if (o["arguments"].get(field)) return bad(at + " has no \"arguments\" (expected a string or a JSON value)");
  if (std::string_view arguments; !field.get_string().get(arguments)) {
    tc.arguments = std::string(arguments);
  } else {
    append_python_json(tc.arguments, field);
  }
  if (simdjson::dom::object arguments; !field.get_object().get(arguments)) {
    auto& parameters = tc.parameters.emplace();
    for (simdjson::dom::key_value_pair p : arguments) {
      std::string value;
      const bool structured = p.value.is_object() || p.value.is_array();
      structured ? append_python_json(value, p.value) : append_python_str(value, p.value);
      parameters.emplace_back(std::string(p.key), std::move(value));
    }
  }
  return tc;
}

// Tool calls at `where`: a list of calls (or, `single_allowed`, one call), each {"name",
// "arguments"} or wrapped in a non-empty {"function": {...}}.
Result<std::vector<ToolCall>> parse_calls(simdjson::dom::element field, const std::string& where, bool single_allowed) {
  std::vector<ToolCall> out;
  simdjson::dom::array list;
  if (field.get_array().get(list)) {
    if (single_allowed && field.is_object()) {
      MMFEED_ASSIGN_OR_RETURN(ToolCall call, parse_call(field, where));
      out.push_back(std::move(call));
      return out;
    }
    return bad(where + " must be a list of tool calls, got " + std::string(json_kind(field)));
  }
  std::size_t index = 0;
  for (simdjson::dom::element call : list) {
    MMFEED_ASSIGN_OR_RETURN(ToolCall parsed, parse_call(call, where + "[" + std::to_string(index++) + "]"));
    out.push_back(std::move(parsed));
  }
  return out;
}

// The message's "tool_calls" (absent, null or empty: none).
Result<std::vector<ToolCall>> parse_tool_calls(simdjson::dom::object message, const std::string& where) {
  simdjson::dom::element field;
  if (message["tool_calls"].get(field) || field.is_null()) return std::vector<ToolCall>{};
  return parse_calls(field, where + ".tool_calls", false);
}

// The message's reasoning under the first of the names transformers reads that is not null.
Result<std::optional<std::string>> parse_reasoning(simdjson::dom::object message, const std::string& where) {
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    simdjson::dom::element field;
    if (message[key].get(field) || field.is_null()) continue;
    MMFEED_ASSIGN_OR_RETURN(std::string_view text, as_string(field, where + "." + key));
    return std::optional<std::string>(text);
  }
  return std::optional<std::string>();
}

// A JSON document held in a string value at `where` (LLaMA-Factory and ms-swift write "tools"
// and a tool call's turn as JSON text). `parser` keeps the document.
Result<simdjson::dom::element> parse_embedded(simdjson::dom::parser& parser, std::string_view text,
                                              const std::string& where) {
  simdjson::dom::element e;
  if (auto err = parser.parse(text.data(), text.size()).get(e); err) {
    return bad(where + " holds malformed JSON: " + simdjson::error_message(err));
  }
  return e;
}

// The sample's "tools" (absent or null: none), each an object as transformers requires: a list,
// or that list written as JSON text.
Result<std::vector<std::string>> parse_tools(simdjson::dom::object sample) {
  std::vector<std::string> out;
  simdjson::dom::element field;
  if (sample["tools"].get(field) || field.is_null()) return out;
  simdjson::dom::parser parser;
  if (std::string_view text; !field.get_string().get(text)) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;  // LLaMA-Factory's "": none
    MMFEED_ASSIGN_OR_RETURN(field, parse_embedded(parser, text, "tools"));
  }
  simdjson::dom::array list;
  if (field.get_array().get(list)) {
    return bad("tools must be a list of tools (JSON schemas), got " + std::string(json_kind(field)));
  }
  std::size_t index = 0;
  for (simdjson::dom::element tool : list) {
    if (!tool.is_object()) {
      return bad("tools[" + std::to_string(index) + "] must be an object (a tool's JSON schema), got " +
                 std::string(json_kind(tool)));
    }
    ++index;
    append_python_json(out.emplace_back(), tool);
  }
  return out;
}

// The media a sample lists beside its text (LLaVA, ShareGPT, LLaMA-Factory, ms-swift), taken in
// order by the <image> and <video> placeholders of its turns.
class ListedMedia {
 public:
  static Result<ListedMedia> of(simdjson::dom::object sample, MediaSources sources) {
    ListedMedia m;
    m.sources_ = sources;
    for (const char* key : {"image", "images"}) {
      if (simdjson::dom::element e; !sample[key].get(e) && !e.is_null()) {
        MMFEED_ASSIGN_OR_RETURN(m.images_, uri_list(e, key));
      }
    }
    for (const char* key : {"video", "videos"}) {
      if (simdjson::dom::element e; !sample[key].get(e) && !e.is_null()) {
        MMFEED_ASSIGN_OR_RETURN(m.videos_, uri_list(e, key));
      }
    }
    for (const char* key : {"audio", "audios"}) {
      if (simdjson::dom::element e; !sample[key].get(e) && !e.is_null()) {
        MMFEED_ASSIGN_OR_RETURN(m.audios_, uri_list(e, key));
      }
    }
    return m;
  }

  bool any() const { return !images_.empty() || !videos_.empty() || !audios_.empty(); }

  // `text` as content items, each placeholder replaced by the next medium listed.
  Status split(std::string_view text, const std::string& where, std::vector<ContentItem>& out) {
    std::size_t at = 0;
    while (at <= text.size()) {
      std::size_t next = std::string_view::npos;
      const Kind* kind = nullptr;
      for (const Kind& k : kKinds) {
        if (const std::size_t found = text.find(k.placeholder, at); found < next) {
          next = found;
          kind = &k;
        }
      }
      if (next > at) {
        out.push_back({ContentItem::Type::kText,
                       std::string(text.substr(at, std::min(next, text.size()) - at)),
                       std::nullopt,
                       {},
                       {}});
      }
      if (kind == nullptr) break;
      auto [list, taken] = slot(kind->type);
      if (taken >= list.size()) {
        return bad(where + ": more " + std::string(kind->placeholder) + " placeholders than " + kind->plural +
                   " listed");
      }
      out.push_back({kind->type, list[taken++], std::nullopt, {}, {}});
      at = next + kind->placeholder.size();
    }
    return ok_status();
  }

  // The next listed medium of `type` for an item that names none ({"type": "image"}).
  Result<std::string> next(ContentItem::Type type, const std::string& where) {
    const Kind& kind = kind_of(type);
    auto [list, taken] = slot(type);
    if (taken >= list.size()) {
      if (sources_ == MediaSources::kOptional) return std::string();  // a placeholder, as the processors render
      return bad(where + " has type '" + kind.name + "' but no \"" + kind.name + "\", and the sample lists no " +
                 kind.plural + " left to take its place");
    }
    return list[taken++];
  }

  // Every medium listed was placed: one left over would be silently lost.
  Status check_all_placed() {
    for (const Kind& k : kKinds) {
      auto [list, taken] = slot(k.type);
      if (taken != list.size()) {
        return bad(std::to_string(list.size()) + " " + k.plural + " listed but " + std::to_string(taken) + " " +
                   std::string(k.placeholder) + " placeholders");
      }
    }
    return ok_status();
  }

 private:
  struct Kind {
    ContentItem::Type type;
    std::string_view placeholder;
    const char* name;
    const char* plural;
  };
  static constexpr Kind kKinds[] = {{ContentItem::Type::kImage, "<image>", "image", "images"},
                                    {ContentItem::Type::kVideo, "<video>", "video", "videos"},
                                    {ContentItem::Type::kAudio, "<audio>", "audio", "audios"}};
  static const Kind& kind_of(ContentItem::Type type) {
    for (const Kind& k : kKinds) {
      if (k.type == type) return k;
    }
    return kKinds[0];
  }
  std::pair<std::vector<std::string>&, std::size_t&> slot(ContentItem::Type type) {
    if (type == ContentItem::Type::kVideo) return {videos_, next_video_};
    if (type == ContentItem::Type::kAudio) return {audios_, next_audio_};
    return {images_, next_image_};
  }

  std::vector<std::string> images_, videos_, audios_;
  MediaSources sources_ = MediaSources::kRequired;
  std::size_t next_image_ = 0, next_video_ = 0, next_audio_ = 0;
};

// A message's text: a string unless it places listed media (LLaMA-Factory, ms-swift, ShareGPT), then
// content items. (Where a template tells them apart, Qwen3-Omni's, a string is what the turn was.)
Status set_text_content(Message& msg, std::string_view text, ListedMedia& listed, const std::string& where) {
  MMFEED_RETURN_IF_ERROR(listed.split(text, where, msg.content));
  const bool places_media = std::any_of(msg.content.begin(), msg.content.end(),
                                        [](const ContentItem& i) { return i.type != ContentItem::Type::kText; });
  if (!places_media) {
    msg.content_is_string = true;
    msg.content.assign(1, ContentItem{ContentItem::Type::kText, std::string(text), std::nullopt, {}, {}});
  }
  return ok_status();
}

// A turn that carries tool calls as JSON text (LLaMA-Factory's "function_call", ms-swift's
// "tool_call": one call or a list), appended to `c`: calls in a row are one assistant message.
Status add_call_turn(Conversation& c, std::string_view text, const std::string& where) {
  simdjson::dom::parser parser;
  MMFEED_ASSIGN_OR_RETURN(simdjson::dom::element calls, parse_embedded(parser, text, where));
  MMFEED_ASSIGN_OR_RETURN(std::vector<ToolCall> parsed, parse_calls(calls, where, true));
  if (c.messages.empty() || c.messages.back().role != "assistant" || c.messages.back().has_content()) {
    Message call;
    call.role = "assistant";
    c.messages.push_back(std::move(call));
  }
  auto& into = c.messages.back().tool_calls;
  into.insert(into.end(), std::make_move_iterator(parsed.begin()), std::make_move_iterator(parsed.end()));
  return ok_status();
}

Result<Conversation> parse_messages(simdjson::dom::element messages, ListedMedia& listed, Conversation c) {
  simdjson::dom::array list;
  if (messages.get_array().get(list)) {
    return bad("messages must be a list of messages, got " + std::string(json_kind(messages)));
  }
  std::size_t index = 0;
  for (simdjson::dom::element m : list) {
    const std::string where = "messages[" + std::to_string(index++) + "]";
    simdjson::dom::object o;
    if (m.get_object().get(o)) {
      return bad(where + " must be an object with \"role\" and \"content\", got " + std::string(json_kind(m)));
    }
    simdjson::dom::element field;
    if (o["role"].get(field)) return bad(where + " has no \"role\" (expected " + std::string(kRoles) + ")");
    MMFEED_ASSIGN_OR_RETURN(std::string_view role, as_string(field, where + ".role"));
    if (role == "tool_call") {  // ms-swift: the call as JSON text in "content"
      if (o["content"].get(field)) return bad(where + " has no \"content\" (expected the call as JSON text)");
      MMFEED_ASSIGN_OR_RETURN(std::string_view call, as_string(field, where + ".content", "the call as JSON text"));
      MMFEED_RETURN_IF_ERROR(add_call_turn(c, call, where + ".content"));
      continue;
    }
    if (role == "tool_response") role = "tool";  // ms-swift's name for a tool's result
    if (!known_role(role)) {
      return bad(where + " has unknown role '" + std::string(role) + "' (expected " + std::string(kRoles) + ")");
    }
    Message msg;
    msg.role = std::string(role);
    MMFEED_ASSIGN_OR_RETURN(msg.tool_calls, parse_tool_calls(o, where));
    MMFEED_ASSIGN_OR_RETURN(msg.reasoning_content, parse_reasoning(o, where));
    std::string_view text;
    simdjson::dom::array items;
    if (o["content"].get(field)) {
      if (msg.tool_calls.empty()) {
        return bad(where + " has no \"content\" (expected a string or a list of content items)");
      }
    } else if (!field.get_string().get(text)) {
      MMFEED_RETURN_IF_ERROR(set_text_content(msg, text, listed, where + ".content"));
    } else if (!field.get_array().get(items)) {
      std::size_t item_index = 0;
      for (simdjson::dom::element item : items) {
        const std::string at = where + ".content[" + std::to_string(item_index++) + "]";
        MMFEED_ASSIGN_OR_RETURN(ContentItem parsed, parse_item(item, at));
        if (parsed.type != ContentItem::Type::kText && parsed.value.empty()) {
          MMFEED_ASSIGN_OR_RETURN(parsed.value, listed.next(parsed.type, at));
        }
        if (parsed.type == ContentItem::Type::kText && listed.any()) {
          MMFEED_RETURN_IF_ERROR(listed.split(parsed.value, at + ".text", msg.content));
        } else {
          msg.content.push_back(std::move(parsed));
        }
      }
    } else {
      return bad(where + ".content must be a string or a list of content items, got " + std::string(json_kind(field)));
    }
    c.messages.push_back(std::move(msg));
  }
  if (c.messages.empty()) return bad("conversation has no messages");
  return c;
}

// LLaVA, ShareGPT and LLaMA-Factory: "from"/"value" turns, placeholders <image>/<video> in the
// text, URIs in a list beside it.
Result<Conversation> parse_conversations(simdjson::dom::element turns, ListedMedia& listed, Conversation c) {
  simdjson::dom::array list;
  if (turns.get_array().get(list)) {
    return bad("conversations must be a list of turns, got " + std::string(json_kind(turns)));
  }
  std::size_t index = 0;
  for (simdjson::dom::element t : list) {
    const std::string where = "conversations[" + std::to_string(index++) + "]";
    simdjson::dom::object o;
    if (t.get_object().get(o)) {
      return bad(where + " must be an object with \"from\" and \"value\", got " + std::string(json_kind(t)));
    }
    simdjson::dom::element field;
    if (o["from"].get(field)) return bad(where + " has no \"from\" (expected " + std::string(kSpeakers) + ")");
    MMFEED_ASSIGN_OR_RETURN(std::string_view from, as_string(field, where + ".from"));
    if (o["value"].get(field)) return bad(where + " has no \"value\" (expected the turn's text)");
    MMFEED_ASSIGN_OR_RETURN(std::string_view value, as_string(field, where + ".value"));
    if (from == "function_call") {  // LLaMA-Factory: the call as JSON text
      MMFEED_RETURN_IF_ERROR(add_call_turn(c, value, where + ".value"));
      continue;
    }
    const auto role = role_of_speaker(from);
    if (!role) {
      return bad(where + " has unknown speaker '" + std::string(from) + "' (expected " + std::string(kSpeakers) + ")");
    }
    Message msg;
    msg.role = *role;
    MMFEED_RETURN_IF_ERROR(set_text_content(msg, value, listed, where));
    c.messages.push_back(std::move(msg));
  }
  if (c.messages.empty()) return bad("conversation has no turns");
  return c;
}

// The sample's top-level "system" (LLaMA-Factory's system column), as its first message. Absent,
// null or empty: none (the template's default prompt then).
Status add_system_key(simdjson::dom::object sample, Conversation& c) {
  simdjson::dom::element field;
  if (sample["system"].get(field) || field.is_null()) return ok_status();
  MMFEED_ASSIGN_OR_RETURN(std::string_view system, as_string(field, "system", "the system prompt"));
  if (system.empty()) return ok_status();
  if (!c.messages.empty() && c.messages.front().role == "system") {
    return bad("the sample has both a \"system\" key and a system message; keep one");
  }
  Message msg;
  msg.role = "system";
  msg.content_is_string = true;
  msg.content.push_back({ContentItem::Type::kText, std::string(system), std::nullopt, {}, {}});
  c.messages.insert(c.messages.begin(), std::move(msg));
  return ok_status();
}

Result<Conversation> parse_sample(simdjson::dom::element doc, Conversation c, MediaSources sources) {
  simdjson::dom::object o;
  if (doc.get_object().get(o)) return bad("sample must be a JSON object, got " + std::string(json_kind(doc)));
  MMFEED_ASSIGN_OR_RETURN(c.tools, parse_tools(o));
  MMFEED_ASSIGN_OR_RETURN(ListedMedia listed, ListedMedia::of(o, sources));
  simdjson::dom::element list;
  if (!o["messages"].get(list)) {
    MMFEED_ASSIGN_OR_RETURN(c, parse_messages(list, listed, std::move(c)));
  } else if (!o["conversations"].get(list)) {
    MMFEED_ASSIGN_OR_RETURN(c, parse_conversations(list, listed, std::move(c)));
  } else {
    return bad("sample has neither \"messages\" nor \"conversations\"");
  }
  MMFEED_RETURN_IF_ERROR(listed.check_all_placed());
  MMFEED_RETURN_IF_ERROR(add_system_key(o, c));
  simdjson::dom::element flag;
  if (!o["use_audio_in_video"].get(flag) && !flag.is_null()) {
    bool value = false;
    if (flag.get_bool().get(value)) {
      return bad("use_audio_in_video must be true or false, got " + std::string(json_kind(flag)));
    }
    c.use_audio_in_video = value;
  }
  return c;
}

}  // namespace

namespace {

// The content items `keep` takes, each as `project` gives it, in order of appearance.
template <class Keep, class Project>
auto collect(const std::vector<Message>& messages, Keep keep, Project project) {
  std::vector<std::decay_t<std::invoke_result_t<Project, const ContentItem&>>> out;
  for (const auto& m : messages) {
    for (const auto& item : m.content) {
      if (keep(item)) out.push_back(project(item));
    }
  }
  return out;
}

auto of_type(ContentItem::Type type) {
  return [type](const ContentItem& item) { return item.type == type; };
}

}  // namespace

std::vector<ContentItem::Type> Conversation::media_kinds() const {
  return collect(
      messages, [](const ContentItem& item) { return item.type != ContentItem::Type::kText; },
      [](const ContentItem& item) { return item.type; });
}

std::size_t Conversation::count(ContentItem::Type type) const {
  std::size_t n = 0;
  for (const auto& m : messages) {
    for (const auto& item : m.content) n += item.type == type;
  }
  return n;
}

std::vector<VideoKeys> Conversation::video_keys() const {
  return collect(messages, of_type(ContentItem::Type::kVideo), [](const ContentItem& item) { return item.video; });
}

std::vector<AudioKeys> Conversation::audio_keys() const {
  return collect(messages, of_type(ContentItem::Type::kAudio), [](const ContentItem& item) { return item.audio; });
}

std::vector<std::string> Conversation::media(ContentItem::Type type) const {
  return collect(messages, of_type(type), [](const ContentItem& item) { return item.value; });
}

Result<Conversation> parse_conversation(std::string_view json, MediaSources sources) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return bad(std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  const std::optional<std::string> id = id_of(doc);
  Conversation c;
  if (id) c.id = *id;
  Result<Conversation> r = parse_sample(doc, std::move(c), sources);
  if (!r.ok() && id) return std::move(r).error().with_context("sample " + *id);
  return r;
}

std::optional<std::string> sample_id_of(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const simdjson::error_code err = parser.parse(json.data(), json.size()).get(doc);
  if (!err) return id_of(doc);
  // A number no double holds (1e999) fails the whole line in the DOM; the id beside it is still
  // read on demand, which parses only the values it visits. Other failures name the line.
  if (err != simdjson::NUMBER_ERROR && err != simdjson::NUMBER_OUT_OF_RANGE) {
    return std::nullopt;
  }
  simdjson::ondemand::parser on_demand;
  const simdjson::padded_string padded(json);
  simdjson::ondemand::document line;
  simdjson::ondemand::value id;
  simdjson::ondemand::json_type type;
  if (on_demand.iterate(padded).get(line) || line.find_field_unordered("id").get(id) || id.type().get(type)) {
    return std::nullopt;
  }
  std::string_view text;
  std::int64_t number = 0;
  if (type == simdjson::ondemand::json_type::string && !id.get_string().get(text) && !text.empty()) {
    return std::string(text);
  }
  if (type == simdjson::ondemand::json_type::number && !id.get_int64().get(number)) return std::to_string(number);
  return std::nullopt;
}

}  // namespace mmfeed::text
