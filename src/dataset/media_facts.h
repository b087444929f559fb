// A medium's cost facts (include/mmfeed/index.h's MediaFacts) read from its header for the
// dataset index: a local file mapped, so only what the header's parser touches is read (an
// image's first pages; a video's packets, counted as the Loader counts them; an audio clip's
// header); a remote image's first bytes fetched by a ranged GET (64 KiB, then 1 MiB where its
// header lies further), a remote video's or audio clip's container header from its first MiB (and
// its last 4 MiB where the header is not first: an MP4's moov at its end; one within the first MiB
// is probed whole), many in flight, one for each object however many samples name it (MediaProber).
//
// Example:
//   MediaFacts f = media_facts(MediaFacts::Kind::kImage, uri).value();   // f.width, f.height
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/index.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

// The ranged GETs a build keeps in flight to read remote media's headers, over all its threads:
// what bounds a build whose media lie behind a first-byte latency (50 ms: about 20 GETs a second
// each), not its cores.
inline constexpr std::size_t kMediaInFlight = 512;

// The facts of the medium at `uri`: known == kRead from a local file's header, kNotProbed for a
// remote object (not read); an error (naming nothing: the caller names the sample and the
// reference) when the file is missing or its header is not one of `kind`'s formats.
Result<MediaFacts> media_facts(MediaFacts::Kind kind, const storage::ObjectUri& uri);

// The facts of media in the order added (`media`): local ones read when added, remote ones
// gathered and read together by ranged GETs of their first (a video's or clip's, and last) bytes
// (at flush(), and whenever 4 x in_flight wait). A medium that cannot be read is counted, named
// (the first `named`) and marked kUnreadable.
class MediaProber {
 public:
  // `in_flight`: the ranged GETs of remote media's first bytes it keeps in flight (each holds at
  // most 1 MiB; an image's 64 KiB), a batch of 4 x in_flight media read together.
  MediaProber(storage::S3Options s3, std::size_t named, std::size_t in_flight = kMediaInFlight)
      : s3_(std::move(s3)), named_(named), in_flight_(in_flight) {}

  // Medium `uri` of `kind` (or why it did not resolve), `name` naming it ("train.jsonl:12: a.jpg").
  void add(MediaFacts::Kind kind, Result<storage::ObjectUri> uri, std::string name);
  // Reads the remote images and videos still waiting.
  void flush();

  std::vector<MediaFacts> media;
  std::vector<std::string> unreadable;  // "NAME: reason", the first `named`
  std::uint64_t unreadable_count = 0, not_probed = 0;

 private:
  struct Waiting {
    std::size_t slot;  // in `media`
    MediaFacts::Kind kind;
    storage::ObjectUri uri;
    std::string name;
  };
  void fail(std::size_t slot, const std::string& name, const Error& why);

  storage::S3Options s3_;
  std::size_t named_;
  std::size_t in_flight_;
  std::vector<Waiting> waiting_;
  std::unique_ptr<storage::Fetcher> fetcher_;  // made for the first remote image or video
};

}  // namespace mmfeed::dataset
