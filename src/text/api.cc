// The public text API (include/mmfeed/text.h) over the engine's tokenizer and chat encoder.
#include "mmfeed/text.h"

#include <atomic>
#include <system_error>
#include <thread>

#include "text/chat_encode.h"
#include "text/conversation.h"
#include "text/tokenizer.h"

namespace mmfeed {

Result<Tokenizer> Tokenizer::from_file(const std::string& path) {
  MMFEED_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> t, text::Tokenizer::from_file(path));
  return Tokenizer(std::move(t));
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json) {
  MMFEED_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> t, text::Tokenizer::from_json(json));
  return Tokenizer(std::move(t));
}

Result<std::vector<std::int32_t>> Tokenizer::encode(std::string_view text) const { return impl_->encode(text); }

Result<std::vector<std::vector<std::int32_t>>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                                       int threads) const {
  std::vector<Result<std::vector<std::int32_t>>> out(texts.size(), Error(ErrorCode::kInternal, "unset"));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < texts.size(); i = next++) out[i] = impl_->encode(texts[i]);
  };
  std::vector<std::thread> pool;
  try {
    for (int w = 1; w < threads && static_cast<std::size_t>(w) < texts.size(); ++w) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // fewer threads than asked: the caller's thread and those started do the work
  }
  work();
  for (std::thread& t : pool) t.join();
  std::vector<std::vector<std::int32_t>> ids;
  ids.reserve(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok()) return std::move(out[i]).error().with_context("text " + std::to_string(i));
    ids.push_back(std::move(out[i]).value());
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::size_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }

Result<std::string> render_chat(std::string_view sample_json, const RenderOptions& options) {
  MMFEED_ASSIGN_OR_RETURN(text::Conversation c, text::parse_conversation(sample_json, text::MediaSources::kOptional));
  MMFEED_ASSIGN_OR_RETURN(text::ChatTemplate tmpl, text::chat_template(options.chat_template));
  MMFEED_ASSIGN_OR_RETURN(text::Rendered r, text::render_chat(c, tmpl,
                                                              {.add_generation_prompt = options.add_generation_prompt,
                                                               .add_vision_id = options.add_vision_id,
                                                               .add_audio_id = options.add_audio_id,
                                                               .enable_thinking = options.enable_thinking}));
  return std::move(r.text);
}

Result<EncodedSample> encode_conversation(const Tokenizer& tokenizer, std::string_view sample_json,
                                          const EncodeOptions& options) {
  MMFEED_ASSIGN_OR_RETURN(text::Conversation c, text::parse_conversation(sample_json, text::MediaSources::kOptional));
  MMFEED_ASSIGN_OR_RETURN(text::ChatTemplate tmpl, text::chat_template(options.chat_template));
  const std::size_t videos = options.video_grids.size();
  if (!options.second_per_grid_ts.empty() && options.second_per_grid_ts.size() != videos) {
    return Error(ErrorCode::kInvalidArgument, "second_per_grid_ts needs one value per video");
  }
  if (!options.video_timestamps.empty() && options.video_timestamps.size() != videos) {
    return Error(ErrorCode::kInvalidArgument, "video_timestamps needs one list per video");
  }
  if (!options.video_audio_tokens.empty() && options.video_audio_tokens.size() != videos) {
    return Error(ErrorCode::kInvalidArgument, "video_audio_tokens needs one count per video");
  }
  std::vector<text::Grid3> images;
  for (const GridThw& g : options.image_grids) images.push_back({g[0], g[1], g[2]});
  std::vector<text::VideoGrid> video_grids;
  for (std::size_t k = 0; k < videos; ++k) {
    const GridThw& g = options.video_grids[k];
    text::VideoGrid& v = video_grids.emplace_back();
    v.grid = {g[0], g[1], g[2]};
    if (!options.second_per_grid_ts.empty()) v.second_per_grid_t = options.second_per_grid_ts[k];
    if (!options.video_timestamps.empty()) v.timestamps = options.video_timestamps[k];
    if (!options.video_audio_tokens.empty()) v.audio_tokens = options.video_audio_tokens[k];
  }
  text::SftOptions o;
  o.max_length = options.max_length;
  o.truncation = options.truncation;
  o.labels = options.labels;
  o.mrope_position_ids = options.mrope;
  o.merge_size = options.merge_size;
  o.tokens_per_second = options.tokens_per_second;
  o.train_reasoning = options.train_reasoning;
  o.render.add_vision_id = options.add_vision_id;
  MMFEED_ASSIGN_OR_RETURN(text::SftSample s, text::encode_conversation(*tokenizer.impl_, c, tmpl, images, video_grids,
                                                                       options.audio_tokens, o));
  EncodedSample out;
  out.input_ids = std::move(s.input_ids);
  out.labels = std::move(s.labels);
  out.attention_mask = std::move(s.attention_mask);
  out.position_ids = std::move(s.position_ids);
  out.images_kept = s.images_kept;
  out.videos_kept = s.videos_kept;
  out.audios_kept = s.audios_kept;
  return out;
}

}  // namespace mmfeed
