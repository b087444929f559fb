// Reading media headers for the dataset index (media_facts.h).
#include "dataset/media_facts.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/mapped_file.h"

#include "mmfeed/audio.h"
#include "vision/decode.h"
#include "vision/video.h"

namespace mmfeed::dataset {

namespace {

std::uint32_t clamped(double v, double most) {
  return static_cast<std::uint32_t>(std::clamp(std::round(v), 0.0, most));
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

}  // namespace mmfeed::dataset
