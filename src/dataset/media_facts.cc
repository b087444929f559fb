// Reading media headers for the dataset index (media_facts.h).
#include "dataset/media_facts.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "audio/decode.h"
#include "core/mapped_file.h"

#include "mmfeed/audio.h"
#include "vision/decode.h"
#include "vision/video.h"

namespace mmfeed::dataset {

namespace {

std::uint32_t clamped(double v, double most) {
  return static_cast<std::uint32_t>(std::clamp(std::round(v), 0.0, most));
}

constexpr std::uint64_t kHead = 64u << 10;               // a remote image's first bytes asked for
constexpr std::uint64_t kLongHead = 1u << 20;            // again, where its header lies past kHead
constexpr std::uint64_t kVideoTail = 4u << 20;           // a remote video's last bytes, where its header is not first
constexpr std::uint64_t kTail = std::uint64_t{1} << 63;  // a request's tag: for its object's last bytes
constexpr std::uint64_t kBytesAsked = 64u << 20;         // a prober's GETs outstanding ask at most this

MediaFacts video_facts(const VideoInfo& info) {
  MediaFacts f;
  f.kind = MediaFacts::Kind::kVideo;
  f.width = static_cast<std::uint32_t>(info.width);
  f.height = static_cast<std::uint32_t>(info.height);
  f.duration_ms = clamped(info.duration_s * 1000, UINT32_MAX);
  f.fps_centi = static_cast<std::uint16_t>(clamped(info.fps * 100, UINT16_MAX));
  f.known = MediaFacts::Known::kRead;
  return f;
}

// A request for an object's bytes: its tag (its first in MediaProber's waiting list, kTail set
// for its last bytes) and the range.
struct Ask {
  std::uint64_t tag = 0;
  storage::ByteRange range;
};

// A remote image's facts from the answer `r` to a GET of its first bytes; an error where its
// header does not read, or (`again` set) where a longer head is to be fetched first.
Result<MediaFacts> image_answer(const storage::FetchResult& r, std::optional<Ask>& again) {
  auto info = vision::probe({reinterpret_cast<const std::uint8_t*>(r.data->data()), r.data->size()});
  if (!info.ok() && r.data->size() == kHead && r.object_size > kHead) {
    again = Ask{r.tag, {0, kLongHead}};  // its header lies further in (a large EXIF block first)
    return Error(ErrorCode::kUnavailable, "its header lies further");
  }
  if (!info.ok()) return std::move(info).error();
  MediaFacts f;
  f.width = static_cast<std::uint32_t>(info->upright_width());
  f.height = static_cast<std::uint32_t>(info->upright_height());
  f.known = MediaFacts::Known::kRead;
  return f;
}

MediaFacts audio_facts(const AudioInfo& info) {
  MediaFacts f;
  f.kind = MediaFacts::Kind::kAudio;
  f.duration_ms = clamped(info.duration_s * 1000, UINT32_MAX);
  f.known = MediaFacts::Known::kRead;
  return f;
}

// A video's or audio clip's facts from its bytes: whole (`size` 0), or its container's header
// from its first bytes `head` and last `tail` of a file of `size` bytes.
Result<MediaFacts> container_facts(MediaFacts::Kind kind, std::span<const std::byte> head,
                                   std::span<const std::byte> tail, std::uint64_t size) {
  if (kind == MediaFacts::Kind::kVideo) {
    auto info = size == 0 ? vision::probe_video(head, {}) : vision::probe_video_header(head, tail, size, {});
    if (!info.ok()) return std::move(info).error();
    return video_facts(*info);
  }
  auto info = size == 0 ? probe_audio(head) : audio::probe_header(head, tail, size);
  if (!info.ok()) return std::move(info).error();
  return audio_facts(*info);
}

// A remote video's or audio clip's facts from the answer `r` to a GET of its first bytes, or of
// its last (tag with kTail; its first kept in `heads` meanwhile). Whole (a short clip): probed as
// the Loader probes it. Else its header's facts from its first bytes, or from its first and last
// (an MP4 written without faststart ends with moov): `again` set where its last are to be
// fetched first.
Result<MediaFacts> container_answer(MediaFacts::Kind kind, storage::FetchResult& r,
                                    std::unordered_map<std::size_t, core::Buffer>& heads, std::optional<Ask>& again) {
  const std::size_t i = r.tag & ~kTail;
  const std::uint64_t size = r.object_size;
  if ((r.tag & kTail) != 0) {
    const core::Buffer head = std::move(heads.at(i));
    heads.erase(i);
    return container_facts(kind, head.span(), r.data->span(), size);
  }
  if (size == 0 || size <= r.data->size()) return container_facts(kind, r.data->span(), {}, 0);
  Result<MediaFacts> facts = container_facts(kind, r.data->span(), {}, size);
  if (facts.ok()) return facts;
  // Its last 4 MiB, or all the rest where less would leave a gap too short to be seeked over
  // (FFmpeg reads through a short one).
  const std::uint64_t rest = size - r.data->size();
  const std::uint64_t tail = rest <= kVideoTail + kLongHead ? rest : kVideoTail;
  heads.emplace(i, std::move(r.data).value());
  again = Ask{i | kTail, {size - tail, tail}};
  return Error(ErrorCode::kUnavailable, "its header lies at its end");
}

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
      return video_facts(info);
    }
    case MediaFacts::Kind::kAudio: {
      MMFEED_ASSIGN_OR_RETURN(const AudioInfo info, probe_audio(bytes));
      return audio_facts(info);
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
  if (uri->scheme != storage::Scheme::kFile) {
    waiting_.push_back({slot, kind, std::move(uri).value(), std::move(name)});
    if (waiting_.size() >= 4 * in_flight_) flush();
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
    options.max_inflight = in_flight_;
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
  std::uint64_t bytes_asked = 0;                            // by the GETs outstanding
  std::unordered_map<std::uint64_t, std::uint64_t> asking;  // tag -> its bytes
  const auto ask = [&](std::uint64_t tag, storage::ByteRange range) {
    if (!fetcher_->submit({waiting_[tag & ~kTail].uri, tag, range})) return;
    ++outstanding;
    bytes_asked += range.length;
    asking[tag] = range.length;
  };
  const auto head_of = [&](std::size_t i) { return waiting_[i].kind == MediaFacts::Kind::kImage ? kHead : kLongHead; };
  std::unordered_map<std::size_t, core::Buffer> heads;  // videos' first bytes, while their last are fetched
  while (next < first.size() || outstanding > 0) {
    while (next < first.size() && outstanding < in_flight_ * 2 &&
           (outstanding == 0 || bytes_asked + head_of(first[next]) <= kBytesAsked)) {
      const std::size_t i = first[next++];
      ask(i, {0, head_of(i)});
    }
    if (outstanding == 0) break;                               // (the fetcher refused them: only once cancelled)
    std::optional<storage::FetchResult> r = fetcher_->next();  // each GET ends within its deadlines
    if (!r) break;
    --outstanding;
    bytes_asked -= asking[r->tag];
    asking.erase(r->tag);
    const std::size_t i = r->tag & ~kTail;
    const std::vector<std::size_t>& same = naming[waiting_[i].uri.to_string()];
    const auto fail_all = [&](const Error& why) {
      for (const std::size_t k : same) fail(waiting_[k].slot, waiting_[k].name, why);
    };
    if (!r->data.ok()) {
      fail_all(r->data.error());
      continue;
    }
    std::optional<Ask> again;  // what to fetch of it next, where this answer is not enough
    Result<MediaFacts> facts = waiting_[i].kind == MediaFacts::Kind::kImage
                                   ? image_answer(*r, again)
                                   : container_answer(waiting_[i].kind, *r, heads, again);
    if (again) {
      ask(again->tag, again->range);
      continue;
    }
    if (!facts.ok()) {
      fail_all(facts.error());
      continue;
    }
    for (const std::size_t k : same) {
      MediaFacts& f = media[waiting_[k].slot];
      const MediaFacts::Kind kind = f.kind;  // as the sample names it
      f = *facts;
      f.kind = kind;
    }
  }
  for (const Waiting& w : waiting_) not_probed += media[w.slot].known == MediaFacts::Known::kNotProbed ? 1 : 0;
  waiting_.clear();
}

}  // namespace mmfeed::dataset
