// How a manifest's samples are described for its dataset index (include/mmfeed/index.h): each
// sample's record (where its text lies, what it names, its text's tokens) and its media's facts,
// the samples shared among the usable cores. A whole build (index.cc) and a part of one built
// apart (index_parts.cc, on another machine of a cluster) describe them by this one code, so
// their records are the same bytes.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::optional<TokenCounter> counter, token_counter(options, index.tokens_key));
//   describe_range(manifests, 0, n, start, options, s3, counter ? &*counter : nullptr, index, chunk);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dataset/index_journal.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "mmfeed/index.h"
#include "storage/credentials.h"
#include "text/chat.h"
#include "text/tokenizer.h"

namespace mmfeed::dataset {

// What counts the samples' text tokens (IndexOptions::tokenizer).
struct TokenCounter {
  std::unique_ptr<text::Tokenizer> tokenizer;
  text::ChatTemplate chat_template{};
};

// Where the text starts in a file whose first bytes are `head`: 3 after a UTF-8 byte-order mark,
// else 0. A compressed manifest (no byte range of its text can be read) is an error naming
// `source`.
Result<std::uint32_t> text_start(std::string_view head, const std::string& source);

// What counts the samples' text tokens (options.tokenizer; nullopt without one), and its key into
// `tokens_key`.
Result<std::optional<TokenCounter>> token_counter(const IndexOptions& options, std::uint32_t& tokens_key);

// Samples [first, end) of `manifests`' held lines described: their records into `index` (sized
// for every sample; a record's offset is `start` + its line's), their media's facts appended to
// index.media, what could not be read into `chunk` (the first kSummaryNamed named); the samples
// shared among the usable cores, a slice each (on this thread alone where the system starts no
// more threads).
void describe_range(const Manifests& manifests, std::uint64_t first, std::uint64_t end, std::uint64_t start,
                    const IndexOptions& options, const storage::S3Options& s3, const TokenCounter* counter,
                    DatasetIndex& index, ChunkCounts& chunk);

}  // namespace mmfeed::dataset
