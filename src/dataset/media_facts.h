// A medium's cost facts (include/mmfeed/index.h's MediaFacts) read from its header for the
// dataset index: a local file mapped, so only what the header's parser touches is read (an
// image's first pages; a video's packets, counted as the Loader counts them; an audio clip's
// header).
//
// Example:
//   MediaFacts f = media_facts(MediaFacts::Kind::kImage, uri).value();   // f.width, f.height
#pragma once

#include "mmfeed/error.h"
#include "mmfeed/index.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

// The facts of the medium at `uri`: known == kRead from a local file's header, kNotProbed for a
// remote object (not read); an error (naming nothing: the caller names the sample and the
// reference) when the file is missing or its header is not one of `kind`'s formats.
Result<MediaFacts> media_facts(MediaFacts::Kind kind, const storage::ObjectUri& uri);

}  // namespace mmfeed::dataset
