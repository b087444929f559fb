// Brace patterns, the way a source names many objects at once ("s3://b/shard-{000..127}.tar",
// "{a,b}/{0..9}.parquet"; Energon split files list them too): expanded in order, and counted --
// names and bytes -- before any name is made, against a budget all of a source's patterns draw on.
//
// Example:
//   NameBudget budget{.prefix = root.size() + 1};
//   MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> names, expand_braces("shard-{00..03}.tar", budget));
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed::dataset {

inline constexpr std::size_t kMaxShardsPerSource = 1 << 20;
inline constexpr std::size_t kMaxShardNameBytes = std::size_t{256} << 20;  // a source's shard names, all told

// What the brace patterns of one source may still expand to. Every pattern of a source (an
// Energon split's train list, or its exclude list) draws on one budget, so that many small
// patterns cannot add up to what one may not.
struct NameBudget {
  std::size_t names = kMaxShardsPerSource;
  std::size_t bytes = kMaxShardNameBytes;
  std::size_t prefix = 0;  // bytes each name is given in front later (a dataset's root and '/')
};

// The names a brace pattern stands for, in order: "{a,b}" lists, "{0..9}" and "{000..127}"
// ranges (zero-padded to the wider bound's width when a bound has a leading zero). Groups may
// repeat ("{a,b}/{0..1}.tar": 4 names); nesting, an unclosed brace, a descending range or more
// than the budget's names or bytes (counted with its prefix, before any name is made) are
// refused; what they take is drawn from `budget`.
Result<std::vector<std::string>> expand_braces(std::string_view pattern, NameBudget& budget);

// The same on a budget of its own (a source of one pattern).
Result<std::vector<std::string>> expand_braces(std::string_view pattern);

}  // namespace mmfeed::dataset
