// A sample's fetched bytes, held one way: a few blocks, each medium a slice of one of them, a
// block freed when the last medium lying in it is released. Every layout becomes this:
//
//   objects      one block per medium (an object, or a shard member by its range), the medium
//                the whole block;
//   shard span   one block, a byte range of one shard spanning every medium, each medium at its
//                offset in it (a sample's media close together: one request, not one each);
//   cells        a sample's Parquet images decoded from their fetched pages (and its other media
//                copied beside them) into one block, replacing the fetched ones.
//
// The sizes returned are capacities, what the caller counts against the byte budget.
//
// Thread safety: none; owned by its sample's one owner at a time (sample.h).
//
// Example:
//   MediaBytes bytes;
//   bytes.plan_objects(media);
//   for (std::size_t b = 0; b < bytes.blocks(); ++b) fetcher.submit(bytes.fetch(b, b));
//   held += bytes.fill(b, std::move(buffer));      // as each arrives
//   decode(bytes.medium(0));
//   held -= bytes.release(0);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "core/buffer_pool.h"
#include "dataset/manifest.h"
#include "storage/fetcher.h"

namespace mmfeed::pipeline {

class MediaBytes {
 public:
  // One block per medium.
  void plan_objects(const std::vector<dataset::MediaSource>& media);
  // One block, `span` (a byte range of one shard), medium i at `places[i]` of it.
  void plan_span(const dataset::MediaSource& span, std::vector<storage::ByteRange> places);

  // The blocks to fetch, and block b's request.
  std::size_t blocks() const { return blocks_.size(); }
  storage::FetchRequest fetch(std::size_t b, std::uint64_t tag) const;
  // Block b's bytes arrived: the bytes now held for it.
  std::int64_t fill(std::size_t b, core::Buffer bytes);

  // Medium i's bytes (empty once released, or when its block never arrived).
  std::span<const std::byte> medium(std::size_t i) const;

  // Every block replaced by `decoded`, medium i at `places[i]` of it: the change in bytes held.
  std::int64_t replace(std::vector<std::byte> decoded, std::vector<storage::ByteRange> places);

  // Medium i is done with: the bytes freed, its block's when it was the last medium lying in it
  // (a medium released twice frees nothing the second time).
  std::int64_t release(std::size_t i);

  // The bytes its blocks hold now.
  std::int64_t held() const;

 private:
  struct Block {
    storage::ObjectUri uri;
    std::optional<storage::ByteRange> range;
    std::variant<core::Buffer, std::vector<std::byte>> data;  // fetched, or decoded (cells)
    std::size_t users = 0;                                    // media lying in it, not yet released
    std::span<const std::byte> bytes() const;
    std::int64_t capacity() const;
  };
  struct Place {
    std::size_t block = 0;
    std::optional<storage::ByteRange> slice;  // none: the whole block
    bool released = false;
  };

  std::vector<Block> blocks_;
  std::vector<Place> places_;
};

}  // namespace mmfeed::pipeline
