// What a LoaderInputs holds (mmfeed/loader.h): the manifests as read, the tokenizer loading or
// loaded, and the options they were read with.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const LoaderInputs> inputs, start_reading(config, s3));
//   const dataset::Manifests& m = inputs->data().manifests;
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/loader.h"
#include "pipeline/sample_processor.h"
#include "storage/credentials.h"

namespace mmfeed {

struct LoaderInputs::Data {
  std::vector<std::string> manifest_names;  // config.manifests as given
  std::string tokenizer_path;
  std::size_t max_manifest_bytes = 0;
  dataset::Manifests manifests;
  pipeline::TokenizerFuture tokenizer;  // may still be loading (start_reading)
};

namespace pipeline {

// Starts loading the tokenizer on a thread of its own and reads the manifests meanwhile; the
// tokenizer's own error is left in its future (Loader::open starts its stages before waiting for
// it). A thread the system refuses is kResourceExhausted.
Result<std::shared_ptr<const LoaderInputs>> start_reading(const LoaderConfig& config, const storage::S3Options& s3);

}  // namespace pipeline
}  // namespace mmfeed
