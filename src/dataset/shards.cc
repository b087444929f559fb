// One file of about 900 lines, on purpose: the shard scan, the read of one sample by its range,
// Energon's split and the .tar.idx read (local and remote) and written share the tar decoding
// below (headers, PAX records, member names) and the scan's state, which a split would export
// through a header for these readers alone. (The remote .tar.idx open and the writer are the
// next to move out, with the scan exported, when this file grows again.)
//
// WebDataset tar shards and Energon datasets (shards.h).
#include "dataset/shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_set>

#include "core/mapped_file.h"
#include "core/owned_fd.h"
#include "dataset/index_cache.h"
#include "dataset/shard_reads.h"
#include "storage/fetcher.h"
#include "storage/redact.h"

namespace mmfeed::dataset {

namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kMaxShardsInFlight = 64;

std::uint64_t padded(std::uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

// A regular file's type flag (what a sample's member is).
bool is_file(char type) { return type == '0' || type == '\0' || type == '7'; }

// A header's numeric field: octal text (spaces and NULs around it), or GNU base-256 (the first
// byte's top bit set) for values past the octal field's range.
std::optional<std::uint64_t> numeric_field(std::span<const std::byte> field) {
  const auto first = std::to_integer<unsigned char>(field[0]);
  if (first & 0x80) {
    if (first & 0x40) return std::nullopt;  // negative
    std::uint64_t v = first & 0x3f;
    for (std::size_t i = 1; i < field.size(); ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | std::to_integer<unsigned char>(field[i]);
    }
    return v;
  }
  std::string_view text(reinterpret_cast<const char*>(field.data()), field.size());
  const std::size_t begin = text.find_first_not_of(' ');
  if (begin == std::string_view::npos) return 0;
  text = text.substr(begin);
  text = text.substr(0, text.find_first_of(std::string_view(" \0", 2)));
  if (text.empty()) return 0;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 8);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string text_field(std::span<const std::byte> field) {
  const std::string_view text(reinterpret_cast<const char*>(field.data()), field.size());
  return std::string(text.substr(0, text.find('\0')));
}

// The "path" and "size" records of a PAX extended header ("<length> <key>=<value>\n" each).
Status apply_pax(std::string_view records, std::optional<std::string>& path, std::optional<std::uint64_t>& size) {
  while (!records.empty()) {
    std::size_t length = 0;
    const auto [end, ec] = std::from_chars(records.data(), records.data() + records.size(), length);
    if (ec != std::errc() || length == 0 || length > records.size()) {
      return Error(ErrorCode::kCorruptData, "a malformed PAX record");
    }
    const std::string_view record = records.substr(0, length);
    records.remove_prefix(length);
    const std::size_t space = record.find(' '), equals = record.find('=');
    if (space == std::string_view::npos || equals == std::string_view::npos || equals < space ||
        !record.ends_with('\n')) {
      return Error(ErrorCode::kCorruptData, "a malformed PAX record");
    }
    const std::string_view key = record.substr(space + 1, equals - space - 1);
    const std::string_view value = record.substr(equals + 1, record.size() - equals - 2);
    if (key == "path") {
      path = std::string(value);
    } else if (key == "size") {
      std::uint64_t v = 0;
      const auto [e, c] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (c != std::errc() || e != value.data() + value.size())
        return Error(ErrorCode::kCorruptData, "a malformed PAX size");
      size = v;
    }
  }
  return ok_status();
}

// One shard's scan: which bytes to read next, and what the answer holds. Reads start one byte
// before the header they want (except the first), so that an answer of that byte alone says
// the shard ends exactly there, and no answer says a header's size ran past its end.
//
// Damage costs the samples it touches, named, not the shard: a sample without a .json member,
// with a .json member over the budget, with two members of one name or whose last member the
// shard's end cuts short fails alone; a header that does not decode ends the scan, and the bytes
// after it are accounted as one failed entry ("from byte N").
class ShardScan {
 public:
  ShardScan(Shard shard, std::size_t limit) : shard_(std::move(shard)), limit_(limit) {}

  const Shard& shard() const { return shard_; }
  bool done() const { return done_; }
  // Each sample's first byte (its first member's first header, extended headers included), then
  // where the last one ends: what energon prepare writes into the shard's .tar.idx.
  std::vector<std::uint64_t> tar_index() const {
    std::vector<std::uint64_t> out(starts_);
    out.push_back(pos_);
    return out;
  }
  // The reason the shard could not be read to its end (a header that does not decode, a member
  // cut short), where one could not.
  const std::optional<Error>& damage() const { return damage_; }
  // Its samples that fail ("key: reason"), counted into `count` and the first of them into `named`.
  void sample_errors(std::vector<std::string>& named, std::size_t most, std::uint64_t& count) const {
    for (const Pending& p : pending_) {
      if (!p.error && p.json) continue;
      ++count;
      if (named.size() < most) {
        named.push_back(shard_.name + "/" + p.key + ": " +
                        (p.error ? p.error->message() : std::string("the sample has no .json member")));
      }
    }
  }

  storage::ByteRange next_read() const {
    const std::uint64_t lead = pos_ > 0 ? 1 : 0;
    return {pos_ - lead, std::max(kScanWindow, want_) + lead};
  }

  // The answer to next_read(): members recorded, the position advanced.
  void feed(std::span<const std::byte> data) {
    if (pos_ > 0) {
      if (data.empty()) return truncated();
      data = data.subspan(1);
    }
    if (data.empty()) {  // the shard ends at a member's end, without the end-of-archive blocks
      if (pos_ == 0) return unreadable(Error(ErrorCode::kCorruptData, "the shard is empty"));
      done_ = true;
      return;
    }
    const bool at_shard_end = data.size() < std::max(kScanWindow, want_);  // the read came back short
    want_ = 0;
    const std::uint64_t base = pos_, end = pos_ + data.size();  // the shard's bytes `data` holds
    while (pos_ + kBlock <= end) {
      const auto at = static_cast<std::size_t>(pos_ - base);
      auto parsed = parse_tar_header(data.subspan(at, kBlock));
      if (!parsed.ok()) return unreadable(std::move(parsed).error());
      if (!*parsed) {  // the end-of-archive block
        done_ = true;
        return;
      }
      TarHeader h = std::move(**parsed);
      const bool named_before = h.type != 'x' && h.type != 'g' && h.type != 'L';  // by a header before it
      if (named_before && pax_size_) h.size = *pax_size_;
      if (named_before && long_name_) h.name = *long_name_;
      const std::uint64_t data_at = pos_ + kBlock;
      if (h.size > UINT64_MAX / 2) return unreadable(Error(ErrorCode::kCorruptData, "a member size past any shard's"));
      const bool meta = h.type == 'L' || h.type == 'x';
      const bool json = is_file(h.type) && is_json(h);
      if ((meta || json) && h.size <= limit_ && data_at + h.size > end) {
        if (at_shard_end) {  // cut short by the shard's end
          if (json) add_member(h, data_at, "");
          last_end_ = data_at + h.size;
          return truncated();
        }
        want_ = kBlock + padded(h.size) + kBlock;  // read it whole, and the header after it
        return;
      }
      if (meta && h.size > limit_) {
        return unreadable(Error(ErrorCode::kResourceExhausted, "an extended header of " + std::to_string(h.size) +
                                                                   " bytes, more than max_manifest_bytes"));
      }
      const std::string_view content =
          meta || (json && h.size <= limit_)
              ? std::string_view(reinterpret_cast<const char*>(data.data()) + at + kBlock, h.size)
              : std::string_view();
      if (meta && !chain_start_) chain_start_ = pos_;  // the member's offset, as Python's tarfile gives it
      if (h.type == 'L') {
        long_name_ = std::string(content.substr(0, content.find('\0')));
      } else if (h.type == 'x') {
        std::optional<std::string> path;
        std::optional<std::uint64_t> size;
        if (Status st = apply_pax(content, path, size); !st.ok()) return unreadable(st.error());
        if (path) long_name_ = std::move(path);
        pax_size_ = size;
      } else if (h.type != 'g') {
        long_name_.reset();
        pax_size_.reset();
        if (is_file(h.type)) add_member(h, data_at, content);
        chain_start_.reset();
      }
      pos_ = data_at + padded(h.size);
      last_end_ = data_at + h.size;
    }
    if (at_shard_end && pos_ < end) {  // fewer than 512 bytes left: a header cut short
      return unreadable(
          Error(ErrorCode::kCorruptData, "the shard ends " + std::to_string(end - pos_) + " bytes into a tar header"));
    }
  }

  // The samples' .json texts and members, appended to `m` as shard number `shard`; a failed
  // sample's line is empty and its error kept.
  Status finish(Manifest& m, std::uint32_t shard, std::vector<ManifestLine>& lines, std::uint32_t manifest) {
    for (Pending& p : pending_) {
      if (!p.error && !p.json) {
        std::string suffixes;
        for (std::size_t i = 0; i < p.members.size(); ++i) suffixes += (i ? ", " : "") + p.members[i].suffix;
        p.error = Error(ErrorCode::kCorruptData, "the sample has no .json member (its members: " + suffixes + ")");
      }
      const std::string_view text = p.error ? std::string_view() : std::string_view(*p.json);
      if (m.text.size() + text.size() + 1 > limit_) {
        return Error(
            ErrorCode::kResourceExhausted,
            "the shards' .json members come to more than max_manifest_bytes (" + std::to_string(limit_) + " bytes)",
            shard_.name);
      }
      lines.push_back({m.text.size(), static_cast<std::uint32_t>(text.size()), manifest, m.samples.size()});
      m.text += text;
      m.text += '\n';
      ShardSample& s = m.samples.emplace_back();
      s.key = std::move(p.key);
      s.shard = shard;
      s.first_member = m.members.size();
      s.member_count = static_cast<std::uint32_t>(p.members.size());
      s.error = std::move(p.error);
      for (ShardMember& member : p.members) m.members.push_back(std::move(member));
    }
    pending_.clear();
    keys_.clear();
    return ok_status();
  }

 private:
  struct Pending {
    std::string key;
    std::vector<ShardMember> members;
    std::optional<std::string> json;
    std::optional<Error> error;
  };

  static bool is_json(const TarHeader& h) {
    const auto split = split_member_name(h.name);
    return split && split->second == "json";
  }

  static Error sample_error(ErrorCode code, const std::string& what, std::uint64_t at) {
    return Error(code, what + " (at byte " + std::to_string(at) + ")");
  }

  void add_member(const TarHeader& h, std::uint64_t data_at, std::string_view content) {
    const auto split = split_member_name(h.name);
    if (!split) return;  // no suffix: not part of a sample (as WebDataset reads it)
    const auto [key, suffix] = *split;
    if (pending_.empty() || pending_.back().key != key) {
      starts_.push_back(chain_start_.value_or(data_at - kBlock));
      pending_.push_back({std::string(key), {}, std::nullopt, std::nullopt});
      if (!keys_.insert(pending_.back().key).second) {
        pending_.back().error = sample_error(
            ErrorCode::kCorruptData,
            "the sample's members are not consecutive: " + h.name + " follows " + "another sample's", data_at - kBlock);
      }
    }
    Pending& p = pending_.back();
    for (const ShardMember& m : p.members) {
      if (m.suffix == suffix && !p.error) {
        p.error = sample_error(ErrorCode::kCorruptData, "the sample has two members named " + h.name, data_at - kBlock);
      }
    }
    if (suffix == "json") {
      if (h.size > limit_) {
        p.error = sample_error(ErrorCode::kResourceExhausted,
                               "its member " + h.name + " declares " + std::to_string(h.size) +
                                   " bytes, more than max_manifest_bytes (" + std::to_string(limit_) + ")",
                               data_at - kBlock);
      } else {
        p.json = std::string(content);
      }
    }
    p.members.push_back({std::string(suffix), data_at, h.size});
  }

  // The shard ends before the next header: the member before it was cut short (or its header
  // lied about its size). Its sample fails; nothing after it was ever there.
  void truncated() {
    done_ = true;
    const std::string what = "the shard ends before byte " + std::to_string(last_end_) +
                             ", where its last member's header says that member ends (a truncated shard, or a header "
                             "lying about its size)";
    damage_ = Error(ErrorCode::kCorruptData, what);
    if (!pending_.empty() && !pending_.back().members.empty() &&
        pending_.back().members.back().offset + pending_.back().members.back().size == last_end_) {
      if (!pending_.back().error) pending_.back().error = Error(ErrorCode::kCorruptData, what);
      return;
    }
    pending_.push_back({"from byte " + std::to_string(pos_), {}, std::nullopt, Error(ErrorCode::kCorruptData, what)});
  }

  // A header at pos_ does not decode: the rest of the shard is one failed entry.
  void unreadable(const Error& e) {
    done_ = true;
    damage_ = Error(e.code(), e.message() + " (at byte " + std::to_string(pos_) + ")");
    pending_.push_back({"from byte " + std::to_string(pos_),
                        {},
                        std::nullopt,
                        Error(e.code(), e.message() + "; the shard is unreadable from byte " + std::to_string(pos_) +
                                            " on (its samples from there are lost)")});
  }

  Shard shard_;
  std::size_t limit_;
  std::uint64_t pos_ = 0;       // the next header's offset
  std::uint64_t last_end_ = 0;  // where the last member's data ends
  std::uint64_t want_ = 0;      // > kScanWindow: bytes the next read needs (a .json member whole)
  bool done_ = false;
  std::optional<std::string> long_name_;  // from a GNU 'L' or PAX header, for the next member
  std::optional<std::uint64_t> pax_size_;
  std::vector<Pending> pending_;              // the samples so far, in order
  std::unordered_set<std::string> keys_;      // theirs
  std::optional<std::uint64_t> chain_start_;  // the extended headers' before the next member
  std::vector<std::uint64_t> starts_;         // each sample's first byte
  std::optional<Error> damage_;
};

}  // namespace

Result<std::optional<TarHeader>> parse_tar_header(std::span<const std::byte> block) {
  if (block.size() != kBlock) return Error(ErrorCode::kCorruptData, "a tar header must be 512 bytes");
  if (std::all_of(block.begin(), block.end(), [](std::byte b) { return b == std::byte{0}; })) {
    return std::optional<TarHeader>();
  }
  // The checksum: the header's bytes summed with its own field read as spaces (unsigned, or
  // signed as some old writers did).
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    const auto u = in_field ? static_cast<unsigned char>(' ') : std::to_integer<unsigned char>(block[i]);
    unsigned_sum += u;
    signed_sum += in_field ? ' ' : static_cast<signed char>(u);
  }
  const auto stored = numeric_field(block.subspan(148, 8));
  if (!stored || (*stored != unsigned_sum && static_cast<std::int64_t>(*stored) != signed_sum)) {
    return Error(ErrorCode::kCorruptData, "not a tar header (its checksum does not match)");
  }
  TarHeader h;
  const auto size = numeric_field(block.subspan(124, 12));
  if (!size) return Error(ErrorCode::kCorruptData, "a tar header with a malformed size field");
  h.size = *size;
  h.type = static_cast<char>(block[156]);
  h.name = text_field(block.subspan(0, 100));
  const std::string_view magic(reinterpret_cast<const char*>(block.data() + 257), 5);
  if (magic == "ustar") {
    const std::string prefix = text_field(block.subspan(345, 155));
    if (!prefix.empty()) h.name = prefix + "/" + h.name;
  }
  return std::optional<TarHeader>(std::move(h));
}

std::optional<std::pair<std::string_view, std::string_view>> split_member_name(std::string_view name) {
  const std::size_t slash = name.rfind('/');
  const std::size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = name.find('.', base);
  if (dot == std::string_view::npos || dot == base) return std::nullopt;
  return std::pair{name.substr(0, dot), name.substr(dot + 1)};
}

namespace {

// The shards `names` scanned, many at once; `remote` set where one is not local.
Result<std::vector<ShardScan>> scan_all(const std::vector<std::string>& names, std::size_t limit,
                                        const storage::S3Options& s3, bool& remote) {
  std::vector<ShardScan> scans;
  for (const std::string& name : names) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(name));
    remote = remote || uri.scheme != storage::Scheme::kFile;
    scans.emplace_back(Shard{std::move(uri), storage::redact_uri(name)}, limit);
  }
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = std::max<std::uint64_t>(limit, kScanWindow) + 2 * kBlock;
  storage::Fetcher fetcher(options, s3);
  // Many shards at once, each one read at a time.
  std::size_t next = 0, in_flight = 0;
  auto submit = [&](std::size_t i) {
    if (!fetcher.submit({scans[i].shard().uri, i, scans[i].next_read()})) {
      return Status(Error(ErrorCode::kCancelled, "the fetcher closed", scans[i].shard().name));
    }
    ++in_flight;
    return ok_status();
  };
  for (; next < scans.size() && next < kMaxShardsInFlight; ++next) MMFEED_RETURN_IF_ERROR(submit(next));
  // A shard that cannot be read fails the source, named; of several, the first in order, whatever
  // order the reads end in: after a failure no shard is started, those before it are read to
  // their end (they were all started: shards start in order), those after it dropped.
  std::optional<std::size_t> failed;
  std::optional<Error> failure;
  while (in_flight > 0) {
    auto r = fetcher.next();
    if (!r) return Error(ErrorCode::kInternal, "the fetcher closed", names.empty() ? "" : names.front());
    --in_flight;
    ShardScan& scan = scans[r->tag];
    if (failed && r->tag > *failed) continue;
    if (!r->data.ok()) {
      const Error& e = r->data.error();
      if (e.code() == ErrorCode::kOutOfRange && scan.next_read().offset > 0) {  // the read began past the end
        scan.feed({});
      } else {
        failed = r->tag;
        failure = std::move(r->data).error();  // it names the shard
        continue;
      }
    } else {
      scan.feed(r->data->span());
    }
    if (!scan.done()) {
      MMFEED_RETURN_IF_ERROR(submit(r->tag));
    } else if (!failed && next < scans.size()) {
      MMFEED_RETURN_IF_ERROR(submit(next++));
    }
  }
  if (failure) return std::move(*failure);
  return scans;
}

// The shards `names` as one source called `source`: scanned; `excluded` samples ("shard.tar/key",
// by the shard's name as written in `names`) left out.
Result<Manifest> read_shard_list(const std::string& source, const std::vector<std::string>& names,
                                 const std::unordered_set<std::string>& excluded, std::size_t limit,
                                 const storage::S3Options& s3, std::uint32_t manifest,
                                 std::vector<ManifestLine>& lines) {
  Manifest m;
  m.name = storage::redact_uri(source);
  MMFEED_ASSIGN_OR_RETURN(std::vector<ShardScan> scans, scan_all(names, limit, s3, m.remote));
  for (std::size_t i = 0; i < scans.size(); ++i) {
    const std::size_t first = m.samples.size(), first_line = lines.size();
    MMFEED_RETURN_IF_ERROR(scans[i].finish(m, static_cast<std::uint32_t>(i), lines, manifest));
    m.shards.push_back(scans[i].shard());
    if (excluded.empty()) continue;
    // Left-out samples keep their place in the text and members, and lose their line.
    std::size_t kept = first_line;
    for (std::size_t k = first_line; k < lines.size(); ++k) {
      const std::string key = names[i] + "/" + m.samples[first + (k - first_line)].key;
      if (!excluded.contains(key)) lines[kept++] = lines[k];
    }
    lines.resize(kept);
  }
  // The fingerprint covers the texts and where every member lies.
  uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(m.text.data()), m.text.size());
  for (const ShardMember& member : m.members) {
    const std::string place = member.suffix + ":" + std::to_string(member.offset) + ":" + std::to_string(member.size);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(place.data()), place.size());
  }
  m.crc32 = static_cast<std::uint32_t>(crc);
  return m;
}

// Reads `size` bytes at `at` of `fd` into `into`; a short read is the shard's end.
Status read_at(int fd, std::uint64_t at, void* into, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(into) + got, size - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(ErrorCode::kIoError, std::string("cannot read it: ") + std::strerror(errno));
    if (n == 0) return Error(ErrorCode::kCorruptData, "the shard ends before byte " + std::to_string(at + size));
    got += static_cast<std::size_t>(n);
  }
  return ok_status();
}

// The .tar.idx `data` of a shard of `shard_size` bytes (`where` names it): its samples' first
// bytes and their end, checked to rise within the shard (each sample at least a header).
Result<std::vector<std::uint64_t>> parse_tar_index(std::span<const std::byte> data, std::uint64_t shard_size,
                                                   const std::string& where) {
  if (data.empty() || data.size() % 8 != 0 || data.size() / 8 > shard_size / kBlock + 1) {
    return Error(ErrorCode::kCorruptData,
                 "is not Energon's index of this shard (" + std::to_string(data.size()) + " bytes for a shard of " +
                     std::to_string(shard_size) + "); run energon prepare again",
                 where);
  }
  std::vector<std::uint64_t> starts(data.size() / 8);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    std::uint64_t v = 0;
    for (int b = 0; b < 8; ++b)
      v |= static_cast<std::uint64_t>(std::to_integer<unsigned char>(data[i * 8 + b])) << (8 * b);
    starts[i] = v;
    const bool rises = i == 0 || v >= starts[i - 1] + kBlock;
    if (v > shard_size || !rises) {
      return Error(ErrorCode::kCorruptData,
                   "entry " + std::to_string(i) + " (" + std::to_string(v) +
                       ") does not follow its samples through the shard; run energon prepare again",
                   where);
    }
  }
  return starts;
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// The .tar.idx at `idx` of the local shard at `path`, read and checked against it: nullopt where
// there is none; an error naming it where it is older than its shard or does not follow its samples.
Result<std::optional<std::vector<std::uint64_t>>> read_tar_index(const std::string& path, const std::string& name,
                                                                 const std::string& idx) {
  struct stat tar {
  }, index{};
  if (::stat(idx.c_str(), &index) != 0) return std::optional<std::vector<std::uint64_t>>();
  if (::stat(path.c_str(), &tar) != 0) return Error(ErrorCode::kNotFound, "no such shard", name);
  if (mtime_ns(index) < mtime_ns(tar)) {
    return Error(ErrorCode::kInvalidArgument,
                 "stale: its shard was written after it; index the shards again (mmfeed index, or energon prepare), "
                 "or delete it",
                 idx);
  }
  auto mapped = core::MappedFile::open(idx);
  if (!mapped.ok()) return Error(ErrorCode::kNotFound, mapped.error().message(), idx);
  MMFEED_ASSIGN_OR_RETURN(std::vector<std::uint64_t> starts,
                          parse_tar_index(mapped->bytes(), static_cast<std::uint64_t>(tar.st_size), idx));
  return std::optional<std::vector<std::uint64_t>>(std::move(starts));
}

// A .tar.idx's bytes: each entry 8 bytes, little-endian.
std::string encode_tar_index(const std::vector<std::uint64_t>& starts) {
  std::string out;
  out.reserve(starts.size() * 8);
  for (const std::uint64_t v : starts) {
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
  }
  return out;
}

}  // namespace

Result<std::optional<Manifest>> open_tar_indexes(const std::string& source, const std::vector<std::string>& names,
                                                 const std::vector<std::string>& index_paths) {
  Manifest m;
  m.name = storage::redact_uri(source);
  ShardRanges ranges;
  uLong crc = crc32_z(0, nullptr, 0);
  std::uint64_t samples = 0;
  bool scanned = false;  // a shard has none, or a sample past 4 GiB: scanned (a stale one is still refused)
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k];
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(name));
    if (uri.scheme != storage::Scheme::kFile || !uri.path.ends_with(".tar")) return std::optional<Manifest>();
    const std::string idx = index_paths.empty() ? uri.path + ".idx" : index_paths[k];
    MMFEED_ASSIGN_OR_RETURN(std::optional<std::vector<std::uint64_t>> read, read_tar_index(uri.path, name, idx));
    if (!read) scanned = true;
    if (scanned) continue;
    std::vector<std::uint64_t> starts = std::move(*read);
    for (std::size_t i = 1; i < starts.size(); ++i) scanned = scanned || starts[i] - starts[i - 1] > UINT32_MAX;
    const std::string bytes = encode_tar_index(starts);  // the file's bytes
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(name.data()), name.size());
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
    ranges.first_sample.push_back(samples);
    samples += starts.size() - 1;
    ranges.starts.push_back(std::move(starts));
    m.shards.push_back(Shard{std::move(uri), storage::redact_uri(name)});
  }
  if (scanned) return std::optional<Manifest>();
  m.crc32 = static_cast<std::uint32_t>(crc);
  m.ranges = std::move(ranges);
  return std::optional<Manifest>(std::move(m));
}

namespace {

constexpr std::uint64_t kMaxTarIndexBytes = std::uint64_t{256} << 20;  // 32M samples a shard
constexpr std::size_t kTarIndexesInFlight = 256;                       // small objects: their round trips are the cost

// The remote shards `names` as manifest `source`, opened from the .tar.idx beside each (fetched,
// 256 at once); nullopt where the first has none, or any other (then scanned). Nothing binds a
// remote .tar.idx to its shard's version (Energon keeps none): a sample whose range does not hold
// one sample is that sample's error, named.
Result<std::optional<Manifest>> open_remote_tar_indexes(const std::string& source,
                                                        const std::vector<std::string>& names,
                                                        const storage::S3Options& s3) {
  std::vector<storage::ObjectUri> uris, indexes;
  for (const std::string& name : names) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(name));
    const bool plain = uri.scheme != storage::Scheme::kFile && name.find_first_of("?#") == std::string::npos;
    if (!plain || !name.ends_with(".tar")) return std::optional<Manifest>();
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri idx, storage::parse_uri(name + ".idx"));
    uris.push_back(std::move(uri));
    indexes.push_back(std::move(idx));
  }
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = kMaxTarIndexBytes;
  options.max_inflight = kTarIndexesInFlight;
  storage::Fetcher fetcher(options, s3);
  std::vector<std::optional<core::Buffer>> got(names.size());
  std::size_t next = 0, in_flight = 0;
  bool missing = false;
  const auto submit = [&]() {
    const bool sent = fetcher.submit({indexes[next], next, std::nullopt});
    ++next;
    ++in_flight;
    return sent ? ok_status() : Status(Error(ErrorCode::kInternal, "the fetcher closed", source));
  };
  MMFEED_RETURN_IF_ERROR(submit());  // the first alone: a set without indexes costs one GET
  while (in_flight > 0) {
    std::optional<storage::FetchResult> r = fetcher.next();
    if (!r) return Error(ErrorCode::kInternal, "the fetcher closed", source);
    --in_flight;
    if (!r->data.ok()) {
      const ErrorCode code = r->data.error().code();
      if (code != ErrorCode::kNotFound && code != ErrorCode::kPermissionDenied) return std::move(r->data).error();
      missing = true;  // (403: a store that hides what is missing)
    } else {
      got[r->tag] = std::move(r->data).value();
    }
    while (!missing && next < names.size() && in_flight < kTarIndexesInFlight) MMFEED_RETURN_IF_ERROR(submit());
  }
  if (missing) return std::optional<Manifest>();
  Manifest m;
  m.name = storage::redact_uri(source);
  m.remote = true;
  ShardRanges ranges;
  uLong crc = crc32_z(0, nullptr, 0);
  std::uint64_t samples = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string where = storage::redact_uri(names[i] + ".idx");
    MMFEED_ASSIGN_OR_RETURN(std::vector<std::uint64_t> starts, parse_tar_index(got[i]->span(), UINT64_MAX / 2, where));
    if (std::adjacent_find(starts.begin(), starts.end(),
                           [](std::uint64_t a, std::uint64_t b) { return b - a > UINT32_MAX; }) != starts.end()) {
      return std::optional<Manifest>();  // a sample past 4 GiB: scanned
    }
    const std::string bytes = encode_tar_index(starts);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(names[i].data()), names[i].size());
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
    ranges.first_sample.push_back(samples);
    samples += starts.size() - 1;
    ranges.starts.push_back(std::move(starts));
    m.shards.push_back(Shard{uris[i], storage::redact_uri(names[i])});
  }
  m.crc32 = static_cast<std::uint32_t>(crc);
  ranges.remote = std::make_shared<const RemoteShardReads>(std::move(uris), s3);
  m.ranges = std::move(ranges);
  return std::optional<Manifest>(std::move(m));
}

}  // namespace

Result<RangeSample> read_shard_range(const std::string& path, std::uint64_t offset, std::uint64_t length,
                                     std::size_t limit) {
  const core::OwnedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return Error(ErrorCode::kNotFound, std::string("cannot open it: ") + std::strerror(errno));
  return parse_shard_range(
      [&](std::uint64_t at, void* into, std::size_t size) { return read_at(fd.fd, at, into, size); }, offset, length,
      limit);
}

Result<RangeSample> parse_shard_range(const RangeReader& read, std::uint64_t offset, std::uint64_t length,
                                      std::size_t limit) {
  const std::uint64_t end = offset + length;
  const auto at_byte = [](const Error& e, std::uint64_t at) {
    return Error(e.code(), e.message() + " (at byte " + std::to_string(at) + ")");
  };
  RangeSample out;
  std::optional<std::string> long_name;
  std::uint64_t pax_size = 0;  // with has_pax_size: a PAX record's size for the next member
  bool has_pax_size = false;
  std::array<std::byte, kBlock> block{};
  for (std::uint64_t pos = offset; pos + kBlock <= end;) {
    if (Status st = read(pos, block.data(), kBlock); !st.ok()) return at_byte(st.error(), pos);
    auto parsed = parse_tar_header(block);
    if (!parsed.ok()) return at_byte(parsed.error(), pos);
    if (!*parsed) break;  // the end-of-archive blocks
    TarHeader h = std::move(**parsed);
    const bool named_before = h.type != 'x' && h.type != 'g' && h.type != 'L';
    if (named_before && has_pax_size) h.size = pax_size;
    if (named_before && long_name) h.name = *long_name;
    const std::uint64_t data_at = pos + kBlock;
    if (h.size > end - data_at) {
      return Error(ErrorCode::kCorruptData, "its member " + h.name + " runs past the sample's range (bytes " +
                                                std::to_string(offset) + "-" + std::to_string(end) +
                                                " by the shard's .tar.idx: run energon prepare again)");
    }
    const bool meta = h.type == 'L' || h.type == 'x';
    const auto split = is_file(h.type) ? split_member_name(h.name) : std::nullopt;
    const bool json = split && split->second == "json";
    std::string content;
    if (meta || json) {
      if (h.size > limit) {
        return at_byte(Error(ErrorCode::kResourceExhausted,
                             "its member " + h.name + " declares " + std::to_string(h.size) +
                                 " bytes, more than max_manifest_bytes (" + std::to_string(limit) + ")"),
                       pos);
      }
      content.resize(h.size);
      if (Status st = read(data_at, content.data(), h.size); !st.ok()) return at_byte(st.error(), data_at);
    }
    if (h.type == 'L') {
      long_name = content.substr(0, content.find('\0'));
    } else if (h.type == 'x') {
      std::optional<std::string> path_record;
      std::optional<std::uint64_t> size_record;
      if (Status st = apply_pax(content, path_record, size_record); !st.ok()) return at_byte(st.error(), pos);
      if (path_record) long_name = std::move(path_record);
      has_pax_size = size_record.has_value();  // as the scan takes it: this record's size, or none
      pax_size = size_record.value_or(0);
    } else if (h.type != 'g') {
      long_name.reset();
      has_pax_size = false;
      if (split) {
        const auto [key, suffix] = *split;
        if (out.key.empty()) out.key = key;
        if (key != out.key) {
          return at_byte(Error(ErrorCode::kCorruptData, "the range holds two samples' members (" + out.key + ", " +
                                                            std::string(key) + "): run energon prepare again"),
                         pos);
        }
        for (const ShardMember& other : out.members) {
          if (other.suffix == suffix) {
            return at_byte(Error(ErrorCode::kCorruptData, "the sample has two members named " + h.name), pos);
          }
        }
        if (json) out.json = std::move(content);
        out.members.push_back({std::string(suffix), data_at, h.size});
      }
    }
    pos = data_at + padded(h.size);
  }
  if (out.members.empty()) return Error(ErrorCode::kCorruptData, "its range holds no sample's member");
  if (std::none_of(out.members.begin(), out.members.end(), [](const ShardMember& x) { return x.suffix == "json"; })) {
    std::string suffixes;
    for (const ShardMember& x : out.members) suffixes += (suffixes.empty() ? "" : ", ") + x.suffix;
    return Error(ErrorCode::kCorruptData, "the sample has no .json member (its members: " + suffixes + ")");
  }
  return out;
}

Result<Manifest> read_shards(const std::string& source, const std::vector<std::string>& shards, std::size_t limit,
                             const storage::S3Options& s3, std::uint32_t manifest, std::vector<ManifestLine>& lines,
                             const std::string& cache_dir) {
  MMFEED_ASSIGN_OR_RETURN(std::optional<Manifest> indexed, open_tar_indexes(source, shards));
  if (!indexed) {
    MMFEED_ASSIGN_OR_RETURN(indexed, open_remote_tar_indexes(source, shards, s3));
  }
  if (!indexed && !cache_dir.empty()) {
    MMFEED_ASSIGN_OR_RETURN(indexed, open_cached_shards(source, shards, cache_dir, limit));
  }
  if (indexed) return std::move(*indexed);
  return read_shard_list(source, shards, {}, limit, s3, manifest, lines);
}

Result<TarIndexesWritten> write_tar_indexes(const std::vector<std::string>& shards,
                                            const std::vector<std::string>& index_paths, std::size_t limit,
                                            const storage::S3Options& s3, std::size_t most_named) {
  TarIndexesWritten out;
  std::vector<std::string> todo;                  // the shards without a current .tar.idx, in order
  std::map<std::string, std::string> written_to;  // each shard's .tar.idx, by shard
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const std::string& name = shards[k];
    MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(name));
    const bool local = uri.scheme == storage::Scheme::kFile;
    if ((local && !uri.path.ends_with(".tar")) || (!local && index_paths.empty())) {
      return Error(ErrorCode::kInvalidArgument,
                   local ? "a shard's name ends in .tar"
                         : "a remote shard's .tar.idx is written into --out DIR, to upload beside it",
                   storage::redact_uri(name));
    }
    const std::string& idx = written_to[name] = index_paths.empty() ? uri.path + ".idx" : index_paths[k];
    // A local shard's, current: newer than it. A remote one's: there and whole.
    Result<std::optional<std::vector<std::uint64_t>>> current = std::optional<std::vector<std::uint64_t>>();
    if (local) {
      current = read_tar_index(uri.path, name, idx);
    } else if (auto mapped = core::MappedFile::open(idx); mapped.ok()) {
      auto starts = parse_tar_index(mapped->bytes(), UINT64_MAX / 2, idx);
      if (starts.ok()) current = std::optional<std::vector<std::uint64_t>>(std::move(starts).value());
    }
    if (current.ok() && *current) {
      ++out.kept;
      out.samples += (*current)->size() - 1;
      out.bytes += (*current)->size() * 8;
    } else {
      todo.push_back(name);  // none, or stale or damaged: written again
    }
  }
  // A group of shards at a time: each one's index written as its group ends, so an interrupted
  // run keeps what it wrote and memory holds one group's .json texts.
  constexpr std::size_t kGroup = 4 * kMaxShardsInFlight;
  for (std::size_t first = 0; first < todo.size(); first += kGroup) {
    const std::vector<std::string> group(
        todo.begin() + static_cast<std::ptrdiff_t>(first),
        todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), first + kGroup)));
    bool remote = false;
    MMFEED_ASSIGN_OR_RETURN(const std::vector<ShardScan> scans, scan_all(group, limit, s3, remote));
    for (std::size_t k = 0; k < scans.size(); ++k) {
      const ShardScan& scan = scans[k];
      scan.sample_errors(out.bad, most_named, out.bad_count);
      if (scan.damage()) {
        ++out.damaged_count;
        if (out.damaged.size() < most_named) out.damaged.push_back(scan.shard().name + ": " + scan.damage()->message());
        continue;
      }
      const std::vector<std::uint64_t> starts = scan.tar_index();
      const std::string bytes = encode_tar_index(starts);
      MMFEED_RETURN_IF_ERROR(core::write_file_whole(written_to.at(group[k]), std::as_bytes(std::span(bytes))));
      ++out.written;
      out.samples += starts.size() - 1;
      out.bytes += bytes.size();
    }
  }
  return out;
}

bool is_energon_dataset(std::string_view path) {
  if (path.find("://") != std::string_view::npos && !path.starts_with("file://")) return path.ends_with('/');
  std::error_code ec;
  const std::string local(path.starts_with("file://") ? path.substr(7) : path);
  return std::filesystem::is_directory(local, ec) && std::filesystem::exists(local + "/.nv-meta/split.yaml", ec);
}

Result<EnergonSplit> parse_energon_split(std::string_view yaml, const std::string& root, const std::string& where) {
  std::vector<std::string> patterns, excludes;
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    const YAML::Node train = doc["split_parts"]["train"];
    if (!train || !train.IsSequence()) {
      return Error(ErrorCode::kInvalidArgument, "has no train split (split_parts: train: [shards...])", where);
    }
    for (const YAML::Node& p : train) patterns.push_back(p.as<std::string>());
    if (const YAML::Node exclude = doc["exclude"]; exclude && exclude.IsSequence()) {
      for (const YAML::Node& e : exclude) excludes.push_back(e.as<std::string>());
    }
  } catch (const YAML::Exception& e) {
    return Error(ErrorCode::kInvalidArgument, std::string("is not the YAML Energon writes: ") + e.what(), where);
  }
  // The exclude list and the train list each expand within a budget of their own, counted with
  // the root every name is given; a train shard is looked up among the excluded ones.
  EnergonSplit split;
  NameBudget exclude_budget{.prefix = root.size() + 1};
  std::unordered_set<std::string> excluded_shards;
  for (const std::string& e : excludes) {
    auto names = expand_braces(e, exclude_budget);
    if (!names.ok()) return std::move(names).error().with_context(where + ": exclude");
    for (std::string& name : *names) {
      // "a.tar" leaves out a shard, "a.tar/key" one of its samples.
      if (name.ends_with(".tar")) {
        excluded_shards.insert(std::move(name));
      } else if (name.find(".tar/") != std::string::npos) {
        split.excluded_samples.insert(root + "/" + name);
      }
    }
  }
  NameBudget train_budget{.prefix = root.size() + 1};
  for (const std::string& p : patterns) {
    auto expanded = expand_braces(p, train_budget);
    if (!expanded.ok()) return std::move(expanded).error().with_context(where + ": split_parts.train");
    for (const std::string& name : *expanded) {
      if (!excluded_shards.contains(name)) split.shards.push_back(root + "/" + name);
    }
  }
  if (split.shards.empty()) return Error(ErrorCode::kInvalidArgument, "its train split names no shard", where);
  return split;
}

Result<Manifest> read_energon_dataset(const std::string& dir, std::size_t limit, const storage::S3Options& s3,
                                      std::uint32_t manifest, std::vector<ManifestLine>& lines) {
  std::string root = dir;
  while (root.size() > 1 && root.ends_with('/')) root.pop_back();
  const std::string split_file = root + "/.nv-meta/split.yaml";
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(split_file));
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = kMaxSplitFileBytes;
  storage::Fetcher fetcher(options, s3);
  if (!fetcher.submit({uri, 0, std::nullopt})) return Error(ErrorCode::kInternal, "the fetcher closed", split_file);
  auto fetched = fetcher.next();
  if (!fetched) return Error(ErrorCode::kInternal, "the fetcher closed", split_file);
  if (!fetched->data.ok()) return std::move(fetched->data).error();
  const std::string_view text(reinterpret_cast<const char*>(fetched->data->data()), fetched->data->size());
  MMFEED_ASSIGN_OR_RETURN(EnergonSplit split, parse_energon_split(text, root, storage::redact_uri(split_file)));
  if (split.excluded_samples.empty()) {  // (a left-out sample is known by its key: the shards are scanned)
    MMFEED_ASSIGN_OR_RETURN(std::optional<Manifest> indexed, open_tar_indexes(dir, split.shards));
    if (!indexed) {
      MMFEED_ASSIGN_OR_RETURN(indexed, open_remote_tar_indexes(dir, split.shards, s3));
    }
    if (indexed) return std::move(*indexed);
  }
  return read_shard_list(dir, split.shards, split.excluded_samples, limit, s3, manifest, lines);
}

}  // namespace mmfeed::dataset
