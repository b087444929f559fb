#include "pipeline/driver.h"

#include <algorithm>
#include <functional>

#include "pipeline/order.h"

namespace mmfeed::pipeline {

Driver::Driver(Stages stages)
    : s_(std::move(stages)),
      options_(s_.settings.drive),
      duplicate_ids_(s_.metrics.counter("loader.duplicate_sample_ids")) {
  for (std::size_t i = 0; s_.population.blend() && i < s_.population.sizes.size(); ++i) {
    per_source_.push_back(&s_.metrics.counter("loader.source" + std::to_string(i) + ".samples"));
  }
}

Status Driver::account(const Work& w) {
  if (w.epoch == s_.start.epoch) {
    id_hashes_.push_back(std::hash<std::string>{}(w.id));
  } else {
    count_duplicate_ids();
  }
  if (w.source < per_source_.size()) per_source_[w.source]->add();
  return s_.errors.count(w.error);
}

Status Driver::end_of_run() {
  ended_.store(true);
  count_duplicate_ids();
  if (options_.order.end_position > 0) return ok_status();  // a part: the whole run is judged by its owner
  return s_.errors.at_end();
}

void Driver::count_duplicate_ids() {
  if (id_hashes_.empty()) return;
  std::sort(id_hashes_.begin(), id_hashes_.end());
  std::int64_t duplicates = 0;
  for (std::size_t i = 1; i < id_hashes_.size(); ++i) duplicates += id_hashes_[i] == id_hashes_[i - 1] ? 1 : 0;
  duplicate_ids_.add(duplicates);
  id_hashes_ = {};
}

}  // namespace mmfeed::pipeline
