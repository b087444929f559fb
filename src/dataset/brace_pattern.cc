#include "dataset/brace_pattern.h"

#include <algorithm>
#include <charconv>

namespace mmfeed::dataset {

namespace {

// A pattern as an error shows it: its first 200 bytes (one may be 20 KB of name).
std::string shown(std::string_view pattern) {
  constexpr std::size_t kShown = 200;
  if (pattern.size() <= kShown) return std::string(pattern);
  return std::string(pattern.substr(0, kShown)) + "... (" + std::to_string(pattern.size()) + " bytes)";
}

// One part of a brace pattern: plain text, or a group of alternatives (listed, or a range).
struct PatternPart {
  std::string_view plain;               // a plain part's text
  bool range = false;                   // a group lo..hi, else a list of `items`
  std::vector<std::string_view> items;  // a list's
  std::uint64_t lo = 0, hi = 0;         // a range's bounds
  std::size_t width = 0;                // a range's zero-padded width (0: none)
  std::uint64_t alternatives = 0;       // 0: a plain part
  std::uint64_t item_bytes = 0;         // the alternatives' lengths summed

  std::string item(std::uint64_t k) const {
    if (!range) return std::string(items[k]);
    std::string digits = std::to_string(lo + k);
    if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
    return digits;
  }
};

// The characters of the numbers lo..hi in decimal, each padded to `width`: by their digit
// counts, not one by one.
std::uint64_t range_bytes(std::uint64_t lo, std::uint64_t hi, std::size_t width) {
  std::uint64_t total = 0, low = 0, high = 9;  // [low, high]: the numbers of `digits` digits
  for (std::uint64_t digits = 1;; ++digits) {
    const std::uint64_t a = std::max(lo, low), b = std::min(hi, high);
    if (a <= b) total += (b - a + 1) * std::max<std::uint64_t>(digits, width);
    if (high >= hi) return total;
    low = high + 1;
    high = high > (UINT64_MAX - 9) / 10 ? UINT64_MAX : high * 10 + 9;
  }
}

Result<std::vector<PatternPart>> parse_pattern(std::string_view pattern) {
  std::vector<PatternPart> parts;
  std::size_t at = 0;
  while (at < pattern.size()) {
    const std::size_t open = pattern.find('{', at);
    const std::size_t stray = pattern.find('}', at);
    if (stray < open) {
      return Error(ErrorCode::kInvalidArgument, "a '}' without its '{' at byte " + std::to_string(stray),
                   shown(pattern));
    }
    PatternPart plain;
    plain.plain = pattern.substr(at, open == std::string_view::npos ? std::string_view::npos : open - at);
    parts.push_back(std::move(plain));
    if (open == std::string_view::npos) break;
    const std::size_t close = pattern.find('}', open);
    if (close == std::string_view::npos) {
      return Error(ErrorCode::kInvalidArgument, "a '{' not closed at byte " + std::to_string(open), shown(pattern));
    }
    const std::string_view group = pattern.substr(open + 1, close - open - 1);
    if (group.find('{') != std::string_view::npos) {
      return Error(ErrorCode::kInvalidArgument, "nested braces are not supported", shown(pattern));
    }
    PatternPart part;
    if (const std::size_t dots = group.find(".."); dots != std::string_view::npos) {
      const std::string_view a = group.substr(0, dots), b = group.substr(dots + 2);
      const auto ra = std::from_chars(a.data(), a.data() + a.size(), part.lo);
      const auto rb = std::from_chars(b.data(), b.data() + b.size(), part.hi);
      if (a.empty() || b.empty() || ra.ec != std::errc() || rb.ec != std::errc() || ra.ptr != a.data() + a.size() ||
          rb.ptr != b.data() + b.size()) {
        return Error(ErrorCode::kInvalidArgument, "the range {" + std::string(group) + "} is not two integers",
                     shown(pattern));
      }
      if (part.hi < part.lo) {
        return Error(ErrorCode::kInvalidArgument, "the range {" + std::string(group) + "} descends", shown(pattern));
      }
      if (part.hi - part.lo >= kMaxShardsPerSource) {
        return Error(
            ErrorCode::kInvalidArgument,
            "the range {" + std::string(group) + "} names more than " + std::to_string(kMaxShardsPerSource) + " shards",
            shown(pattern));
      }
      const bool pad = (a.size() > 1 && a[0] == '0') || (b.size() > 1 && b[0] == '0');
      part.range = true;
      part.width = pad ? std::max(a.size(), b.size()) : 0;
      part.alternatives = part.hi - part.lo + 1;
      part.item_bytes = range_bytes(part.lo, part.hi, part.width);
    } else {
      std::size_t from = 0;
      for (;;) {
        const std::size_t comma = group.find(',', from);
        part.items.push_back(
            group.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
        part.item_bytes += part.items.back().size();
        if (comma == std::string_view::npos) break;
        from = comma + 1;
      }
      part.alternatives = part.items.size();
    }
    parts.push_back(std::move(part));
    at = close + 1;
  }
  return parts;
}

}  // namespace

Result<std::vector<std::string>> expand_braces(std::string_view pattern, NameBudget& budget) {
  MMFEED_ASSIGN_OR_RETURN(std::vector<PatternPart> parts, parse_pattern(pattern));
  // What the names will hold, counted before any is made: each part multiplies the names before
  // it by its alternatives. Sums saturate past the budget (they are only compared with it).
  const auto cap = [](unsigned __int128 v) {
    return static_cast<std::uint64_t>(std::min<unsigned __int128>(v, UINT64_MAX));
  };
  std::uint64_t names = 1, bytes = 0;
  for (const PatternPart& p : parts) {
    if (p.alternatives == 0) {
      bytes = cap(static_cast<unsigned __int128>(bytes) + static_cast<unsigned __int128>(names) * p.plain.size());
    } else {
      bytes = cap(static_cast<unsigned __int128>(bytes) * p.alternatives +
                  static_cast<unsigned __int128>(names) * p.item_bytes);
      names = cap(static_cast<unsigned __int128>(names) * p.alternatives);
    }
  }
  bytes = cap(static_cast<unsigned __int128>(bytes) + static_cast<unsigned __int128>(names) * budget.prefix);
  if (names > budget.names) {
    return Error(ErrorCode::kInvalidArgument,
                 "the pattern names more than the " + std::to_string(budget.names) + " shards left to its source (" +
                     std::to_string(kMaxShardsPerSource) + " in all)",
                 shown(pattern));
  }
  if (bytes > budget.bytes) {
    return Error(ErrorCode::kResourceExhausted,
                 "the pattern's names take more than the " + std::to_string(budget.bytes) +
                     " bytes left to its source's shard names (" + std::to_string(kMaxShardNameBytes) + " in all)",
                 shown(pattern));
  }
  budget.names -= static_cast<std::size_t>(names);
  budget.bytes -= static_cast<std::size_t>(bytes);
  std::vector<std::string> out{""};
  for (const PatternPart& p : parts) {
    if (p.alternatives == 0) {
      for (std::string& name : out) name += p.plain;
      continue;
    }
    std::vector<std::string> next;
    next.reserve(out.size() * p.alternatives);
    for (const std::string& prefix : out) {
      for (std::uint64_t k = 0; k < p.alternatives; ++k) next.push_back(prefix + p.item(k));
    }
    out = std::move(next);
  }
  return out;
}

Result<std::vector<std::string>> expand_braces(std::string_view pattern) {
  NameBudget budget;
  return expand_braces(pattern, budget);
}

}  // namespace mmfeed::dataset
