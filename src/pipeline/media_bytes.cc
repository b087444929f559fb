#include "pipeline/media_bytes.h"

namespace mmfeed::pipeline {

std::span<const std::byte> MediaBytes::Block::bytes() const {
  if (const auto* fetched = std::get_if<core::Buffer>(&data)) return fetched->span();
  return std::get<std::vector<std::byte>>(data);
}

std::int64_t MediaBytes::Block::capacity() const {
  if (const auto* fetched = std::get_if<core::Buffer>(&data)) return static_cast<std::int64_t>(fetched->capacity());
  return static_cast<std::int64_t>(std::get<std::vector<std::byte>>(data).capacity());
}

void MediaBytes::plan_objects(const std::vector<dataset::MediaSource>& media) {
  blocks_.clear();
  places_.clear();
  for (std::size_t i = 0; i < media.size(); ++i) {
    blocks_.push_back(Block{media[i].uri, media[i].range, core::Buffer(), 1});
    places_.push_back(Place{i, std::nullopt, false});
  }
}

void MediaBytes::plan_span(const dataset::MediaSource& span, std::vector<storage::ByteRange> places) {
  blocks_.clear();
  places_.clear();
  blocks_.push_back(Block{span.uri, span.range, core::Buffer(), places.size()});
  for (const storage::ByteRange& p : places) places_.push_back(Place{0, p, false});
}

storage::FetchRequest MediaBytes::fetch(std::size_t b, std::uint64_t tag) const {
  return storage::FetchRequest{blocks_[b].uri, tag, blocks_[b].range};
}

std::int64_t MediaBytes::fill(std::size_t b, core::Buffer bytes) {
  blocks_[b].data = std::move(bytes);
  return blocks_[b].capacity();
}

std::span<const std::byte> MediaBytes::medium(std::size_t i) const {
  const Place& p = places_[i];
  if (p.released) return {};
  const std::span<const std::byte> block = blocks_[p.block].bytes();
  if (!p.slice) return block;
  if (p.slice->offset > block.size() || p.slice->length > block.size() - p.slice->offset) return {};  // short read
  return block.subspan(p.slice->offset, p.slice->length);
}

std::int64_t MediaBytes::replace(std::vector<std::byte> decoded, std::vector<storage::ByteRange> places) {
  std::int64_t delta = 0;
  for (const Block& b : blocks_) delta -= b.capacity();
  blocks_.clear();
  places_.clear();
  Block& block = blocks_.emplace_back(Block{storage::ObjectUri{}, std::nullopt, std::move(decoded), places.size()});
  delta += block.capacity();
  for (const storage::ByteRange& p : places) places_.push_back(Place{0, p, false});
  return delta;
}

std::int64_t MediaBytes::held() const {
  std::int64_t total = 0;
  for (const Block& b : blocks_) total += b.capacity();
  return total;
}

std::int64_t MediaBytes::release(std::size_t i) {
  Place& p = places_[i];
  if (p.released) return 0;
  p.released = true;
  Block& b = blocks_[p.block];
  if (--b.users > 0) return 0;
  const std::int64_t freed = b.capacity();
  b.data = core::Buffer();
  return freed;
}

}  // namespace mmfeed::pipeline
