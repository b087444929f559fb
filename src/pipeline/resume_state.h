// The resume state's internals: the fingerprint a state carries of its run, and the checks a
// state passes before a run starts from it. LoaderState's own JSON form and resharding
// (include/mmfeed/loader.h) are implemented beside them, in resume_state.cc.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/loader.h"
#include "pipeline/order.h"

namespace mmfeed::pipeline {

using Fingerprint = std::vector<std::pair<std::string, std::string>>;

// What a resume state must agree with: the data (each manifest's size, lines and CRC-32) and the
// options that decide the order and the batches. The number of epochs is not part of it (a run
// may be extended); the world size and rank are checked on their own (resharding changes them).
// Packing plans rows from token counts, so with token_budget the options that change a sample's
// tokens are part of it too.
// `epoch_length`: population_of(config, manifests).epoch_length(), what positions index.
Fingerprint fingerprint_of(const LoaderConfig& config, const dataset::Manifests& manifests, std::uint64_t epoch_length);

// "" when the state's fingerprint matches the run's (or it has none), else each difference:
// "shuffle was true, now false; samples was 23, now 25".
std::string fingerprint_mismatch(const Fingerprint& was, const Fingerprint& now);

// Where a run starts: the beginning, or `resume` once it is checked against the run — its
// fingerprint, seed, world size and rank, an epoch within the run's, a position within the
// epoch, packing fields only when packing; unordered and serial runs cannot resume. `population`
// is population_of(config, manifests).
Result<LoaderState> start_state(const LoaderConfig& config, const dataset::Manifests& manifests,
                                const Population& population, std::optional<LoaderState> resume);

}  // namespace mmfeed::pipeline
