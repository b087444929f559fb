#include "text/chat.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>

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

// What a JSON value is, for messages that say what was found: "a number", "an object".
std::string_view kind_of(simdjson::dom::element e) {
  switch (e.type()) {
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

// The string at `path`, or an error naming the path and what it holds instead.
Result<std::string_view> as_string(simdjson::dom::element e, const std::string& path, std::string_view what = {}) {
  std::string_view s;
  if (!e.get_string().get(s)) return s;
  return bad(path + " must be a string" + (what.empty() ? "" : " (" + std::string(what) + ")") + ", got " +
             std::string(kind_of(e)));
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
    return bad(std::string(key) + " must be a URI or a list of URIs, got " + std::string(kind_of(e)));
  }
  return out;
}

// One item of a message's content list at `where` ("messages[1].content[0]").
Result<ContentItem> parse_item(simdjson::dom::element item, const std::string& where) {
  simdjson::dom::object o;
  if (item.get_object().get(o)) {
    return bad(where + " must be an object (a text, image or video item), got " + std::string(kind_of(item)));
  }
  std::string_view type;  // stays empty when absent or not a string: the keys decide then
  if (o["type"].get_string().get(type) != simdjson::SUCCESS) type = {};
  simdjson::dom::element field;
  if (!o["image"].get(field)) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view uri, as_string(field, where + ".image", "the image's URI"));
    return ContentItem{ContentItem::Type::kImage, std::string(uri)};
  }
  if (!o["image_url"].get(field)) {  // OpenAI's {"image_url": {"url": ...}}, or the URI itself
    std::string_view uri;
    if (!field.get_string().get(uri) || !field["url"].get_string().get(uri)) {
      return ContentItem{ContentItem::Type::kImage, std::string(uri)};
    }
    return bad(where + ".image_url must be a URI or an object with a string \"url\", got " +
               std::string(kind_of(field)));
  }
  if (type == "image") return bad(where + " has type 'image' but no \"image\" or \"image_url\"");
  if (!o["video"].get(field)) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view uri, as_string(field, where + ".video", "the video's URI"));
    return ContentItem{ContentItem::Type::kVideo, std::string(uri)};
  }
  if (type == "video") return bad(where + " has type 'video' but no \"video\"");
  if (!o["text"].get(field)) {
    MMFEED_ASSIGN_OR_RETURN(std::string_view text, as_string(field, where + ".text"));
    return ContentItem{ContentItem::Type::kText, std::string(text)};
  }
  return bad(where + " has no \"text\", \"image\" or \"video\"" +
             (type.empty() ? std::string() : " (type '" + std::string(type) + "')"));
}

Result<Conversation> parse_messages(simdjson::dom::element messages, Conversation c) {
  simdjson::dom::array list;
  if (messages.get_array().get(list)) {
    return bad("messages must be a list of messages, got " + std::string(kind_of(messages)));
  }
  std::size_t index = 0;
  for (simdjson::dom::element m : list) {
    const std::string where = "messages[" + std::to_string(index++) + "]";
    simdjson::dom::object o;
    if (m.get_object().get(o)) {
      return bad(where + " must be an object with \"role\" and \"content\", got " + std::string(kind_of(m)));
    }
    simdjson::dom::element field;
    if (o["role"].get(field)) return bad(where + " has no \"role\" (expected " + std::string(kRoles) + ")");
    MMFEED_ASSIGN_OR_RETURN(std::string_view role, as_string(field, where + ".role"));
    if (!known_role(role)) {
      return bad(where + " has unknown role '" + std::string(role) + "' (expected " + std::string(kRoles) + ")");
    }
    Message msg;
    msg.role = std::string(role);
    if (o["content"].get(field)) return bad(where + " has no \"content\" (expected a string or a list of content items)");
    std::string_view text;
    simdjson::dom::array items;
    if (!field.get_string().get(text)) {
      msg.content_is_string = true;
      msg.content.push_back({ContentItem::Type::kText, std::string(text)});
    } else if (!field.get_array().get(items)) {
      std::size_t item_index = 0;
      for (simdjson::dom::element item : items) {
        MMFEED_ASSIGN_OR_RETURN(ContentItem parsed,
                                parse_item(item, where + ".content[" + std::to_string(item_index++) + "]"));
        msg.content.push_back(std::move(parsed));
      }
    } else {
      return bad(where + ".content must be a string or a list of content items, got " + std::string(kind_of(field)));
    }
    c.messages.push_back(std::move(msg));
  }
  if (c.messages.empty()) return bad("conversation has no messages");
  return c;
}

// LLaVA and ShareGPT: placeholders <image>/<video> in the text, URIs in a list beside it.
Result<Conversation> parse_conversations(simdjson::dom::object doc, simdjson::dom::element turns, Conversation c) {
  simdjson::dom::array list;
  if (turns.get_array().get(list)) {
    return bad("conversations must be a list of turns, got " + std::string(kind_of(turns)));
  }
  std::vector<std::string> images, videos;
  for (const char* key : {"image", "images"}) {
    simdjson::dom::element e;
    if (!doc[key].get(e)) {
      MMFEED_ASSIGN_OR_RETURN(images, uri_list(e, key));
    }
  }
  for (const char* key : {"video", "videos"}) {
    simdjson::dom::element e;
    if (!doc[key].get(e)) {
      MMFEED_ASSIGN_OR_RETURN(videos, uri_list(e, key));
    }
  }
  std::size_t next_image = 0, next_video = 0, index = 0;
  for (simdjson::dom::element t : list) {
    const std::string where = "conversations[" + std::to_string(index++) + "]";
    simdjson::dom::object o;
    if (t.get_object().get(o)) {
      return bad(where + " must be an object with \"from\" and \"value\", got " + std::string(kind_of(t)));
    }
    simdjson::dom::element field;
    if (o["from"].get(field)) return bad(where + " has no \"from\" (expected " + std::string(kSpeakers) + ")");
    MMFEED_ASSIGN_OR_RETURN(std::string_view from, as_string(field, where + ".from"));
    const auto role = role_of_speaker(from);
    if (!role) {
      return bad(where + " has unknown speaker '" + std::string(from) + "' (expected " + std::string(kSpeakers) + ")");
    }
    if (o["value"].get(field)) return bad(where + " has no \"value\" (expected the turn's text)");
    MMFEED_ASSIGN_OR_RETURN(std::string_view value, as_string(field, where + ".value"));
    Message msg;
    msg.role = *role;
    std::size_t at = 0;
    while (at <= value.size()) {
      const std::size_t img = value.find("<image>", at);
      const std::size_t vid = value.find("<video>", at);
      const std::size_t next = std::min(img, vid);
      if (next > at) {
        msg.content.push_back({ContentItem::Type::kText, std::string(value.substr(at, std::min(next, value.size()) - at))});
      }
      if (next == std::string_view::npos) break;
      if (next == img) {
        if (next_image >= images.size()) return bad(where + ": more <image> placeholders than images listed");
        msg.content.push_back({ContentItem::Type::kImage, images[next_image++]});
      } else {
        if (next_video >= videos.size()) return bad(where + ": more <video> placeholders than videos listed");
        msg.content.push_back({ContentItem::Type::kVideo, videos[next_video++]});
      }
      at = next + 7;
    }
    c.messages.push_back(std::move(msg));
  }
  if (next_image != images.size()) {
    return bad(std::to_string(images.size()) + " images listed but " + std::to_string(next_image) + " <image> placeholders");
  }
  if (next_video != videos.size()) {
    return bad(std::to_string(videos.size()) + " videos listed but " + std::to_string(next_video) + " <video> placeholders");
  }
  if (c.messages.empty()) return bad("conversation has no turns");
  return c;
}

Result<Conversation> parse_sample(simdjson::dom::element doc, Conversation c) {
  simdjson::dom::object o;
  if (doc.get_object().get(o)) return bad("sample must be a JSON object, got " + std::string(kind_of(doc)));
  simdjson::dom::element list;
  if (!o["messages"].get(list)) return parse_messages(list, std::move(c));
  if (!o["conversations"].get(list)) return parse_conversations(o, list, std::move(c));
  return bad("sample has neither \"messages\" nor \"conversations\"");
}

}  // namespace

std::size_t Conversation::count(ContentItem::Type type) const {
  std::size_t n = 0;
  for (const auto& m : messages) {
    for (const auto& item : m.content) n += item.type == type;
  }
  return n;
}

std::vector<std::string> Conversation::media(ContentItem::Type type) const {
  std::vector<std::string> out;
  for (const auto& m : messages) {
    for (const auto& item : m.content) {
      if (item.type == type) out.push_back(item.value);
    }
  }
  return out;
}

Result<Conversation> parse_conversation(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return bad(std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  const std::optional<std::string> id = id_of(doc);
  Conversation c;
  if (id) c.id = *id;
  Result<Conversation> r = parse_sample(doc, std::move(c));
  if (!r.ok() && id) return std::move(r).error().with_context("sample " + *id);
  return r;
}

std::optional<std::string> sample_id_of(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc)) return std::nullopt;
  return id_of(doc);
}

Result<ChatTemplate> chat_template(std::string_view name) {
  if (name == "qwen2-vl" || name == "qwen2.5-vl") return ChatTemplate::kQwen2VL;
  return Error(ErrorCode::kUnsupported, "chat template '" + std::string(name) +
                                            "' is not available (known: qwen2-vl, qwen2.5-vl); mmfeed renders only "
                                            "templates it reproduces exactly");
}

Result<Rendered> render_chat(const Conversation& c, ChatTemplate, const RenderOptions& options) {
  // The Qwen2-VL / Qwen2.5-VL template (tests/data/chat-templates/qwen2_vl.jinja).
  Rendered r;
  std::string& out = r.text;
  int images = 0, videos = 0;
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (i == 0 && m.role != "system") out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    out += "<|im_start|>" + m.role + "\n";
    const std::size_t content_begin = out.size();
    for (const ContentItem& item : m.content) {
      switch (item.type) {
        case ContentItem::Type::kText:
          out += item.value;
          break;
        case ContentItem::Type::kImage:
          ++images;
          if (options.add_vision_id) out += "Picture " + std::to_string(images) + ": ";
          out += "<|vision_start|><|image_pad|><|vision_end|>";
          break;
        case ContentItem::Type::kVideo:
          ++videos;
          if (options.add_vision_id) out += "Video " + std::to_string(videos) + ": ";
          out += "<|vision_start|><|video_pad|><|vision_end|>";
          break;
      }
    }
    if (m.role == "assistant") {
      r.assistant_content.push_back({content_begin, out.size()});
      r.assistant_end.push_back({out.size(), out.size() + 11});
    }
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return r;
}

Result<SftSample> encode_conversation(const Tokenizer& tok, const Conversation& c, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const Grid3> video_grids,
                                      const SftOptions& options) {
  const std::size_t n_images = c.count(ContentItem::Type::kImage);
  const std::size_t n_videos = c.count(ContentItem::Type::kVideo);
  if (n_images != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_images) + " images but " +
                                                  std::to_string(image_grids.size()) + " image grids were given");
  }
  if (n_videos != video_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_videos) + " videos but " +
                                                  std::to_string(video_grids.size()) + " video grids were given");
  }
  if (options.merge_size < 1) {
    return Error(ErrorCode::kInvalidArgument, "merge_size " + std::to_string(options.merge_size) + " is not positive");
  }
  for (std::span<const Grid3> grids : {image_grids, video_grids}) {
    for (const Grid3& g : grids) {  // a patch grid the merger can cut into merge x merge blocks
      if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % options.merge_size != 0 || g.w % options.merge_size != 0) {
        return Error(ErrorCode::kInvalidArgument,
                     "grid (" + std::to_string(g.t) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) +
                         ") is not positive with h and w multiples of merge_size " + std::to_string(options.merge_size));
      }
    }
  }
  MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c, tmpl, options.render));
  MMFEED_ASSIGN_OR_RETURN(Encoding enc, tok.encode_with_offsets(r.text));
  const auto image_pad = tok.token_to_id("<|image_pad|>");
  const auto video_pad = tok.token_to_id("<|video_pad|>");
  const auto vision_start = tok.token_to_id("<|vision_start|>");
  const auto vision_end = tok.token_to_id("<|vision_end|>");
  if (!image_pad || !video_pad || !vision_start || !vision_end) {
    return Error(ErrorCode::kUnsupported, "tokenizer lacks the Qwen-VL vision tokens");
  }
  auto trained = [&](std::size_t at) {
    for (std::size_t k = 0; k < r.assistant_content.size(); ++k) {
      if (at >= r.assistant_content[k].begin && at < r.assistant_content[k].end) return true;
      const std::size_t end_len = options.labels == LabelPolicy::kQwen ? 11 : 10;  // "<|im_end|>" (+ "\n")
      if (at >= r.assistant_end[k].begin && at < r.assistant_end[k].begin + end_len) return true;
    }
    return false;
  };

  SftSample s;
  const std::int64_t merge2 = static_cast<std::int64_t>(options.merge_size) * options.merge_size;
  std::size_t next_image = 0, next_video = 0;
  struct Block {
    std::size_t start, end;  // [<|vision_start|> index, one past the pads)
    bool image;
  };
  std::vector<Block> blocks;
  std::size_t block_start = 0;
  for (std::size_t i = 0; i < enc.ids.size(); ++i) {
    const std::int32_t id = enc.ids[i];
    if (id == *image_pad || id == *video_pad) {
      const bool image = id == *image_pad;
      if (image ? next_image >= image_grids.size() : next_video >= video_grids.size()) {
        return Error(ErrorCode::kInvalidArgument, "text holds more vision pads than grids given");
      }
      const Grid3 g = image ? image_grids[next_image++] : video_grids[next_video++];
      const std::int64_t n = g.t * g.h * g.w / merge2;
      s.input_ids.insert(s.input_ids.end(), static_cast<std::size_t>(n), id);
      s.labels.insert(s.labels.end(), static_cast<std::size_t>(n), kIgnoreIndex);
      blocks.push_back({block_start, s.input_ids.size(), image});
      continue;
    }
    if (id == *vision_start) block_start = s.input_ids.size();
    s.input_ids.push_back(id);
    const bool vision = id == *vision_start || id == *vision_end;
    s.labels.push_back(!vision && trained(enc.offsets[i].first) ? id : kIgnoreIndex);
  }
  if (next_image != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "text of the conversation holds " + std::to_string(next_image) +
                                                  " image pads for " + std::to_string(image_grids.size()) + " grids");
  }
  s.images_kept = image_grids.size();
  s.videos_kept = video_grids.size();

  if (options.max_length > 0 && s.input_ids.size() > options.max_length) {
    if (options.truncation == Truncation::kError) {
      return Error(ErrorCode::kResourceExhausted, "conversation has " + std::to_string(s.input_ids.size()) +
                                                      " tokens, more than max_length " + std::to_string(options.max_length));
    }
    std::size_t cut = options.max_length;
    s.images_kept = s.videos_kept = 0;
    for (const Block& b : blocks) {  // never cut inside a block (+1: its <|vision_end|>)
      if (b.end + 1 <= cut) {
        (b.image ? s.images_kept : s.videos_kept) += 1;
      } else {
        cut = std::min(cut, b.start);
        break;
      }
    }
    s.input_ids.resize(cut);
    s.labels.resize(cut);
  }
  s.attention_mask.assign(s.input_ids.size(), 1);

  if (options.mrope_position_ids) {
    // Text runs count on all three axes; a vision block starts at the next position and walks
    // (t, h/merge, w/merge); the text after it continues from the block's maximum + 1.
    const std::size_t L = s.input_ids.size();
    s.position_ids.assign(3 * L, 0);
    std::int64_t next_pos = 0;
    std::size_t i = 0, image = 0, video = 0;
    while (i < L) {
      const std::int32_t id = s.input_ids[i];
      if (id != *image_pad && id != *video_pad) {
        for (int axis = 0; axis < 3; ++axis) s.position_ids[axis * L + i] = static_cast<std::int32_t>(next_pos);
        ++next_pos;
        ++i;
        continue;
      }
      const Grid3 g = id == *image_pad ? image_grids[image++] : video_grids[video++];
      const std::int64_t gh = g.h / options.merge_size, gw = g.w / options.merge_size;
      std::int64_t max_pos = next_pos;
      for (std::int64_t t = 0; t < g.t; ++t) {
        for (std::int64_t h = 0; h < gh; ++h) {
          for (std::int64_t w = 0; w < gw; ++w, ++i) {
            s.position_ids[0 * L + i] = static_cast<std::int32_t>(next_pos + t);
            s.position_ids[1 * L + i] = static_cast<std::int32_t>(next_pos + h);
            s.position_ids[2 * L + i] = static_cast<std::int32_t>(next_pos + w);
            max_pos = std::max({max_pos, next_pos + t, next_pos + h, next_pos + w});
          }
        }
      }
      next_pos = max_pos + 1;
    }
  }
  return s;
}

}  // namespace mmfeed::text
