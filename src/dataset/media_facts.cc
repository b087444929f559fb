// Reading media headers for the dataset index (media_facts.h).
#include "dataset/media_facts.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"

#include "mmfeed/audio.h"
#include "vision/decode.h"
#include "vision/video.h"

namespace mmfeed::dataset {

namespace {

std::uint32_t clamped(double v, double most) {
  return static_cast<std::uint32_t>(std::clamp(std::round(v), 0.0, most));
}

constexpr std::uint64_t kHead = 64u << 10;     // a remote image's first bytes asked for
constexpr std::uint64_t kLongHead = 1u << 20;  // again, where its header lies past kHead
constexpr std::size_t kWaiting = 256;          // remote images read together
constexpr std::size_t kInFlight = 64;

}  // namespace

Result<MediaFacts> media_facts(MediaFacts::Kind kind, const storage::ObjectUri& uri) {
  MediaFacts f;
  f.kind = kind;
  if (uri.scheme != storage::Scheme::kFile) return f;  // kNotProbed
  MMFEED_ASSIGN_OR_RETURN(const core::MappedFile file, core::MappedFile::open(uri.path));
  const std::span<const std::byte> bytes = file.bytes();
  switch (kind) {
    case MediaFacts::Kind::kImage: {
      MMFEED_ASSIGN_OR_RETURN(const vision::ImageInfo info,
                              vision::probe({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}));
      f.width = static_cast<std::uint32_t>(info.upright_width());
      f.height = static_cast<std::uint32_t>(info.upright_height());
      break;
    }
    case MediaFacts::Kind::kVideo: {
      MMFEED_ASSIGN_OR_RETURN(const VideoInfo info, vision::probe_video(bytes, {}));
      f.width = static_cast<std::uint32_t>(info.width);
      f.height = static_cast<std::uint32_t>(info.height);
      f.duration_ms = clamped(info.duration_s * 1000, UINT32_MAX);
      f.fps_centi = static_cast<std::uint16_t>(clamped(info.fps * 100, UINT16_MAX));
      break;
    }
    case MediaFacts::Kind::kAudio: {
      MMFEED_ASSIGN_OR_RETURN(const AudioInfo info, probe_audio(bytes));
      f.duration_ms = clamped(info.duration_s * 1000, UINT32_MAX);
      break;
    }
  }
  f.known = MediaFacts::Known::kRead;
  return f;
}

void MediaProber::fail(std::size_t slot, const std::string& name, const Error& why) {
  media[slot].known = MediaFacts::Known::kUnreadable;
  if (unreadable.size() < named_) unreadable.push_back(name + ": " + why.to_string());
  ++unreadable_count;
}

void MediaProber::add(MediaFacts::Kind kind, Result<storage::ObjectUri> uri, std::string name) {
  MediaFacts f;
  f.kind = kind;
  media.push_back(f);
  const std::size_t slot = media.size() - 1;
  if (!uri.ok()) return fail(slot, name, uri.error());
  if (uri->scheme != storage::Scheme::kFile && kind == MediaFacts::Kind::kImage) {
    waiting_.push_back({slot, std::move(uri).value(), std::move(name)});
    if (waiting_.size() >= kWaiting) flush();
    return;
  }
  auto read = media_facts(kind, *uri);
  if (!read.ok()) return fail(slot, name, read.error());
  media[slot] = *read;
  not_probed += read->known == MediaFacts::Known::kNotProbed ? 1 : 0;
}

void MediaProber::flush() {
  if (waiting_.empty()) return;
  if (!fetcher_) {
    storage::FetchOptions options;
    options.part_size = 0;
    options.max_inflight = kInFlight;
    fetcher_ = std::make_unique<storage::Fetcher>(options, s3_);
  }
  // One GET for each object, however many samples name it.
  std::unordered_map<std::string, std::vector<std::size_t>> naming;
  std::vector<std::size_t> first;  // of each object, in waiting_
  for (std::size_t i = 0; i < waiting_.size(); ++i) {
    std::vector<std::size_t>& same = naming[waiting_[i].uri.to_string()];
    if (same.empty()) first.push_back(i);
    same.push_back(i);
  }
  std::size_t next = 0, outstanding = 0;
  const auto ask = [&](std::size_t i, std::uint64_t bytes) {
    outstanding += fetcher_->submit({waiting_[i].uri, i, storage::ByteRange{0, bytes}}) ? 1 : 0;
  };
  while (next < first.size() || outstanding > 0) {
    while (next < first.size() && outstanding < kInFlight * 2) ask(first[next++], kHead);
    if (outstanding == 0) break;                               // (the fetcher refused them: only once cancelled)
    std::optional<storage::FetchResult> r = fetcher_->next();  // each GET ends within its deadlines
    if (!r) break;
    --outstanding;
    const std::vector<std::size_t>& same = naming[waiting_[r->tag].uri.to_string()];
    if (!r->data.ok()) {
      for (const std::size_t i : same) fail(waiting_[i].slot, waiting_[i].name, r->data.error());
      continue;
    }
    auto info = vision::probe({reinterpret_cast<const std::uint8_t*>(r->data->data()), r->data->size()});
    if (!info.ok() && r->data->size() == kHead && r->object_size > kHead) {
      ask(r->tag, kLongHead);  // its header lies further in (a large EXIF block first)
      continue;
    }
    for (const std::size_t i : same) {
      MediaFacts& f = media[waiting_[i].slot];
      if (!info.ok()) {
        fail(waiting_[i].slot, waiting_[i].name, info.error());
        continue;
      }
      f.width = static_cast<std::uint32_t>(info->upright_width());
      f.height = static_cast<std::uint32_t>(info->upright_height());
      f.known = MediaFacts::Known::kRead;
    }
  }
  for (const Waiting& w : waiting_) not_probed += media[w.slot].known == MediaFacts::Known::kNotProbed ? 1 : 0;
  waiting_.clear();
}

}  // namespace mmfeed::dataset
