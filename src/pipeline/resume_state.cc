// The resume state: LoaderState's JSON form (every field range-checked, the message naming it),
// resharding across world sizes, and the fingerprint a state carries of the run it was taken in.
#include "pipeline/resume_state.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

#include "mmfeed/json.h"
#include "mmfeed/loader_options.h"
#include "mmfeed/numbers.h"
#include "pipeline/config.h"
#include "pipeline/order.h"

namespace mmfeed {

namespace {

std::string json_list(const std::vector<std::uint64_t>& values) {
  std::string list = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) list += ',';
    list += std::to_string(values[i]);
  }
  return list + "]";
}

Result<std::vector<std::uint64_t>> uint_list(simdjson::dom::element e, const char* what) {
  simdjson::dom::array a;
  if (e.get_array().get(a)) return Error(ErrorCode::kInvalidArgument, std::string(what) + " is not a list");
  std::vector<std::uint64_t> out;
  for (simdjson::dom::element v : a) {
    std::uint64_t x = 0;
    if (v.get_uint64().get(x)) return Error(ErrorCode::kInvalidArgument, std::string(what) + " holds a non-integer");
    out.push_back(x);
  }
  return out;
}

std::string json_switches(const std::vector<CostSwitch>& switches) {
  std::string list = "[";
  char number[32];
  for (std::size_t i = 0; i < switches.size(); ++i) {
    list +=
        std::string(i ? "," : "") + "[" + std::to_string(switches[i].epoch) + "," + std::to_string(switches[i].step);
    for (const double c : switches[i].cost) {
      std::snprintf(number, sizeof number, ",%.17g", c);
      list += number;
    }
    list += "]";
  }
  return list + "]";
}

// A state's list of cost switches: [epoch, step, four coefficients] each, in increasing order.
Result<std::vector<CostSwitch>> switch_list(simdjson::dom::element e, const char* what) {
  const auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, std::string("loader state: ") + what + " " + why);
  };
  simdjson::dom::array a;
  if (e.get_array().get(a)) return bad("is not a list");
  std::vector<CostSwitch> out;
  for (simdjson::dom::element item : a) {
    simdjson::dom::array fields;
    if (item.get_array().get(fields) || fields.size() != 6) {
      return bad("holds an entry that is not [epoch, step, four coefficients]");
    }
    CostSwitch s;
    std::uint64_t epoch = 0;
    if (fields.at(0).get_uint64().get(epoch) || epoch > INT32_MAX || fields.at(1).get_uint64().get(s.step)) {
      return bad("holds an epoch or step that is not a non-negative integer");
    }
    s.epoch = static_cast<int>(epoch);
    for (std::size_t i = 0; i < 4; ++i) {
      if (fields.at(i + 2).get_double().get(s.cost[i]) || !std::isfinite(s.cost[i]) || s.cost[i] < 0 ||
          s.cost[i] > 1e15) {
        return bad("holds a coefficient outside 0 to 1e15");
      }
    }
    if (!out.empty() && std::pair{s.epoch, s.step} <= std::pair{out.back().epoch, out.back().step}) {
      return bad("is not in increasing order of epoch and step");
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

std::string LoaderState::to_json() const {
  std::string out = "{\"seed\":" + std::to_string(seed) + ",\"rank\":" + std::to_string(rank) +
                    ",\"world_size\":" + std::to_string(world_size) + ",\"epoch\":" + std::to_string(epoch) +
                    ",\"position\":" + std::to_string(position) +
                    ",\"packed_delivered\":" + std::to_string(packed_delivered);
  if (!window_delivered.empty()) out += ",\"window_delivered\":" + json_list(window_delivered);
  if (old_world_size > 0) {
    out += ",\"old_world_size\":" + std::to_string(old_world_size) + ",\"old_positions\":" + json_list(old_positions);
    if (!old_windows.empty()) {
      out += ",\"old_windows\":[";
      for (std::size_t i = 0; i < old_windows.size(); ++i) {
        if (i) out += ',';
        out += json_list(old_windows[i]);
      }
      out += "]";
    }
  }
  if (!cost_switches.empty()) out += ",\"balance_switches\":" + json_switches(cost_switches);
  if (!old_cost_switches.empty()) out += ",\"old_balance_switches\":" + json_switches(old_cost_switches);
  if (!fingerprint.empty()) {
    out += ",\"fingerprint\":{";
    for (std::size_t i = 0; i < fingerprint.size(); ++i) {
      if (i) out += ",";
      append_json_string(out, fingerprint[i].first);
      out += ":";
      append_json_string(out, fingerprint[i].second);
    }
    out += "}";
  }
  return out + "}";
}

namespace {

// A field of the state that must be an integer in [lo, hi]: the message says which and why.
template <class T>
Result<T> state_int(simdjson::dom::element doc, const char* field, std::int64_t lo, std::uint64_t hi) {
  simdjson::dom::element e;
  if (doc[field].get(e)) return Error(ErrorCode::kInvalidArgument, std::string("loader state lacks ") + field);
  std::uint64_t u = 0;
  std::int64_t i = 0;
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (!e.get_uint64().get(u)) {
    if (u > hi)
      return Error(ErrorCode::kInvalidArgument,
                   std::string("loader state: ") + field + " " + std::to_string(u) + " is outside " + range);
    return static_cast<T>(u);
  }
  if (!e.get_int64().get(i)) {  // negative
    if (i < lo)
      return Error(ErrorCode::kInvalidArgument,
                   std::string("loader state: ") + field + " " + std::to_string(i) + " is outside " + range);
    return static_cast<T>(i);
  }
  return Error(ErrorCode::kInvalidArgument, std::string("loader state: ") + field + " must be an integer in " + range);
}

// How many samples rank `rank` of `world` took in an epoch of the run `fingerprint` describes
// (its sample count and remainder policy); nullopt for a state without them (made by hand).
std::optional<std::uint64_t> epoch_size_of(const std::vector<std::pair<std::string, std::string>>& fingerprint,
                                           int rank, int world) {
  std::optional<std::uint64_t> samples;
  std::optional<ShardRemainder> remainder;
  for (const auto& [key, value] : fingerprint) {
    if (key == "samples") {
      if (auto n = parse_number<std::uint64_t>(key, value, 0, UINT64_MAX); n.ok()) samples = *n;
    } else if (key == "shard_remainder") {
      remainder = parse_choice<ShardRemainder>(value);
    }
  }
  if (!samples || !remainder) return std::nullopt;
  return pipeline::rank_epoch_size(*samples, rank, world, *remainder);
}

}  // namespace

Result<LoaderState> LoaderState::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error(ErrorCode::kInvalidArgument,
                 std::string("loader state is not valid JSON: ") + simdjson::error_message(err) +
                     (err == simdjson::NUMBER_ERROR ? " (a number outside 0..2^64-1?)" : ""));
  }
  if (!doc.is_object()) return Error(ErrorCode::kInvalidArgument, "loader state is not a JSON object");
  constexpr auto kIntMax = static_cast<std::uint64_t>(INT32_MAX);
  LoaderState s;
  MMFEED_ASSIGN_OR_RETURN(s.seed, state_int<std::uint64_t>(doc, "seed", 0, UINT64_MAX));
  MMFEED_ASSIGN_OR_RETURN(s.rank, state_int<int>(doc, "rank", 0, kIntMax));
  MMFEED_ASSIGN_OR_RETURN(s.world_size, state_int<int>(doc, "world_size", 1, kIntMax));
  MMFEED_ASSIGN_OR_RETURN(s.epoch, state_int<int>(doc, "epoch", 0, kIntMax));
  MMFEED_ASSIGN_OR_RETURN(s.position, state_int<std::uint64_t>(doc, "position", 0, UINT64_MAX));
  if (simdjson::dom::element e; !doc["packed_delivered"].get(e)) {
    MMFEED_ASSIGN_OR_RETURN(s.packed_delivered, state_int<std::uint64_t>(doc, "packed_delivered", 0, UINT64_MAX));
  }
  if (simdjson::dom::element w; !doc["window_delivered"].get(w)) {
    MMFEED_ASSIGN_OR_RETURN(s.window_delivered, uint_list(w, "window_delivered"));
  }
  simdjson::dom::element old_positions;
  if (simdjson::dom::element e; !doc["old_world_size"].get(e) && !doc["old_positions"].get(old_positions)) {
    MMFEED_ASSIGN_OR_RETURN(s.old_world_size, state_int<int>(doc, "old_world_size", 1, kIntMax));
    MMFEED_ASSIGN_OR_RETURN(s.old_positions, uint_list(old_positions, "old_positions"));
    if (simdjson::dom::array windows; !doc["old_windows"].get_array().get(windows)) {
      for (simdjson::dom::element w : windows) {
        MMFEED_ASSIGN_OR_RETURN(auto list, uint_list(w, "old_windows"));
        s.old_windows.push_back(std::move(list));
      }
      if (s.old_windows.size() != static_cast<std::size_t>(s.old_world_size)) {
        return Error(ErrorCode::kInvalidArgument, "old_windows does not hold one list per old rank");
      }
    }
    if (s.old_positions.size() != static_cast<std::size_t>(s.old_world_size)) {
      return Error(ErrorCode::kInvalidArgument, "old_positions does not hold one position per old rank");
    }
  }
  if (simdjson::dom::element e; !doc["balance_switches"].get(e)) {
    MMFEED_ASSIGN_OR_RETURN(s.cost_switches, switch_list(e, "balance_switches"));
  }
  if (simdjson::dom::element e; !doc["old_balance_switches"].get(e)) {
    if (s.old_world_size == 0) {
      return Error(ErrorCode::kInvalidArgument, "loader state: old_balance_switches without old_world_size");
    }
    MMFEED_ASSIGN_OR_RETURN(s.old_cost_switches, switch_list(e, "old_balance_switches"));
  }
  if (simdjson::dom::element f; !doc["fingerprint"].get(f)) {
    simdjson::dom::object fields;
    if (f.get_object().get(fields))
      return Error(ErrorCode::kInvalidArgument, "loader state: fingerprint is not an object");
    for (auto [key, value] : fields) {
      std::string_view v;
      if (value.get_string().get(v)) {
        return Error(ErrorCode::kInvalidArgument, "loader state: fingerprint." + std::string(key) + " is not a string");
      }
      s.fingerprint.emplace_back(std::string(key), std::string(v));
    }
  }
  return s;
}

Result<LoaderState> LoaderState::reshard(const std::vector<LoaderState>& old_ranks, int rank, int world_size) {
  if (old_ranks.empty()) return Error(ErrorCode::kInvalidArgument, "no old states to reshard");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Error(ErrorCode::kInvalidArgument,
                 "rank " + std::to_string(rank) + " is outside world_size " + std::to_string(world_size));
  }
  const int old_world = old_ranks.front().world_size;
  if (static_cast<int>(old_ranks.size()) != old_world) {
    return Error(ErrorCode::kInvalidArgument, "resharding needs the states of all " + std::to_string(old_world) +
                                                  " old ranks, got " + std::to_string(old_ranks.size()));
  }
  LoaderState out;
  out.seed = old_ranks.front().seed;
  out.epoch = old_ranks.front().epoch;
  out.rank = rank;
  out.world_size = world_size;
  out.old_world_size = old_world;
  out.fingerprint = old_ranks.front().fingerprint;
  out.old_positions.assign(static_cast<std::size_t>(old_world), 0);
  std::vector<bool> seen(static_cast<std::size_t>(old_world), false);
  for (const LoaderState& s : old_ranks) {
    if (s.seed != out.seed || s.epoch != out.epoch || s.world_size != old_world) {
      return Error(ErrorCode::kInvalidArgument, "the old states differ in seed, epoch or world size");
    }
    if (s.fingerprint != out.fingerprint) {
      return Error(ErrorCode::kInvalidArgument,
                   "the old states were taken over different runs (their fingerprints differ)");
    }
    if (s.packed_delivered != 0 && s.window_delivered.empty()) {
      return Error(ErrorCode::kUnsupported, "rank " + std::to_string(s.rank) +
                                                " stopped inside a packing window and its state does not say which "
                                                "samples it delivered (an older state); resume it at the same world "
                                                "size until the window ends");
    }
    if (s.old_world_size != 0) {
      return Error(ErrorCode::kUnsupported,
                   "rank " + std::to_string(s.rank) + " is itself inside a resharded epoch; finish the epoch first");
    }
    if (s.rank < 0 || s.rank >= old_world || seen[static_cast<std::size_t>(s.rank)]) {
      return Error(ErrorCode::kInvalidArgument,
                   "the old states do not cover ranks 0.." + std::to_string(old_world - 1) + " exactly once");
    }
    seen[static_cast<std::size_t>(s.rank)] = true;
    if (const auto size = epoch_size_of(s.fingerprint, s.rank, old_world)) {
      if (s.position > *size) {
        return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(s.rank) + "'s position " +
                                                      std::to_string(s.position) + " is past its epoch of " +
                                                      std::to_string(*size) + " samples");
      }
      for (std::uint64_t p : s.window_delivered) {
        if (p >= *size) {
          return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(s.rank) +
                                                        "'s window_delivered names position " + std::to_string(p) +
                                                        ", past its epoch of " + std::to_string(*size) + " samples");
        }
      }
    }
    if (s.cost_switches != old_ranks.front().cost_switches) {
      return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(s.rank) +
                                                    "'s cost model was recalibrated (balance_switches) unlike rank " +
                                                    std::to_string(old_ranks.front().rank) + "'s");
    }
    out.old_positions[static_cast<std::size_t>(s.rank)] = s.position;
    if (!s.window_delivered.empty()) {
      out.old_windows.resize(static_cast<std::size_t>(old_world));
      out.old_windows[static_cast<std::size_t>(s.rank)] = s.window_delivered;
    }
  }
  // The old world's order is arranged as it was; the new world plans the rest of the epoch with
  // the latest model from its first step.
  out.old_cost_switches = old_ranks.front().cost_switches;
  if (!out.old_cost_switches.empty()) out.cost_switches = {{out.epoch, 0, out.old_cost_switches.back().cost}};
  return out;
}

std::pair<int, std::uint64_t> LoaderState::open_step(const LoaderConfig& config) const {
  const std::uint64_t group =
      group_positions(config) *
      (config.token_budget > 0 ? 1 : std::max<std::size_t>(config.gradient_accumulation_steps, 1));
  if (packed_delivered > 0) return {epoch, position / group + 1};  // inside the window at position
  return {epoch, (position + group - 1) / group};
}

namespace pipeline {

Fingerprint fingerprint_of(const LoaderConfig& c, const dataset::Manifests& m, std::uint64_t epoch_length) {
  Fingerprint f;
  char crc[16];
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const std::uint64_t lines = m.files[i].line_count;
    std::snprintf(crc, sizeof crc, "%08x", m.files[i].crc32);
    f.emplace_back("manifest " + std::to_string(i), m.files[i].name + " (" + std::to_string(m.files[i].text_size()) +
                                                        " bytes, " + std::to_string(lines) + " samples, crc32 " + crc +
                                                        ")");
  }
  // An epoch's length: what positions index (a blend's draws, else every sample).
  f.emplace_back("samples", std::to_string(epoch_length));
  for (const auto& [key, values] : {std::pair{"weights", &c.weights}, std::pair{"source_repeats", &c.source_repeats}}) {
    if (values->empty()) continue;
    std::string text;
    char number[32];
    for (const double w : *values) {
      std::snprintf(number, sizeof number, "%.17g", w);
      text += (text.empty() ? "" : ",") + std::string(number);
    }
    f.emplace_back(key, text);
  }
  f.emplace_back("seed", std::to_string(c.seed));
  f.emplace_back("shuffle", c.shuffle ? "true" : "false");
  f.emplace_back("shard_remainder", std::string(choice_name(c.shard_remainder)));
  f.emplace_back("batch_size", std::to_string(c.batch_size));
  if (c.balance != Balance::kNone) {  // the plan's inputs (balance.h)
    f.emplace_back("balance", std::string(choice_name(c.balance)));
    f.emplace_back("gradient_accumulation_steps", std::to_string(c.gradient_accumulation_steps));
    std::string cost;
    for (const double v : c.balance_cost) cost += (cost.empty() ? "" : ",") + std::to_string(v);
    if (!cost.empty()) f.emplace_back("balance_cost", cost);
    if (c.token_budget == 0) {  // (a packed run names them below)
      f.emplace_back("model", c.model);
      f.emplace_back("min_pixels", std::to_string(c.min_pixels));
      f.emplace_back("max_pixels", std::to_string(c.max_pixels));
    }
  }
  f.emplace_back("token_budget", std::to_string(c.token_budget));
  if (c.token_budget > 0) {
    f.emplace_back("pack_window", std::to_string(c.pack_window));
    f.emplace_back("model", c.model);
    f.emplace_back("chat_template", c.chat_template);
    f.emplace_back("min_pixels", std::to_string(c.min_pixels));
    f.emplace_back("max_pixels", std::to_string(c.max_pixels));
    f.emplace_back("max_length", std::to_string(c.max_length));
    f.emplace_back("truncation", std::string(choice_name(c.truncation)));
    auto joined = [](const auto& list) {
      std::string out;
      for (const auto& v : list) {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
          out += (out.empty() ? "" : ",") + v;
        } else {
          out += (out.empty() ? "" : ",") + std::to_string(v);
        }
      }
      return out;
    };
    if (!c.source_max_pixels.empty()) f.emplace_back("source_max_pixels", joined(c.source_max_pixels));
    if (!c.source_chat_template.empty()) f.emplace_back("source_chat_template", joined(c.source_chat_template));
    if (c.packed_format == PackedFormat::kThd) {  // its padding counts against the budget
      f.emplace_back("packed_format", std::string(choice_name(c.packed_format)));
      f.emplace_back("pad_to_multiple_of", std::to_string(c.pad_to_multiple_of));
    }
  }
  return f;
}

std::string fingerprint_mismatch(const Fingerprint& was, const Fingerprint& now) {
  if (was.empty()) return "";
  std::string diff;
  auto find = [](const auto& list, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : list) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  auto note = [&](const std::string& key, const std::string* a, const std::string* b) {
    diff += (diff.empty() ? "" : "; ") + key + " was " + (a ? *a : "absent") + ", now " + (b ? *b : "absent");
  };
  for (const auto& [key, value] : now) {
    const std::string* old = find(was, key);
    if (!old || *old != value) note(key, old, &value);
  }
  for (const auto& [key, value] : was) {
    if (!find(now, key)) note(key, &value, nullptr);
  }
  return diff;
}

namespace {

// A resharded state's old ranks' positions and delivered windows, each inside its old rank's
// epoch of `n` samples.
Status check_old_positions(const LoaderConfig& config, const LoaderState& start, std::uint64_t n) {
  for (std::size_t r = 0; start.old_world_size > 0 && r < start.old_positions.size(); ++r) {
    const std::uint64_t size = rank_epoch_size(n, static_cast<int>(r), start.old_world_size, config.shard_remainder);
    auto past = [&](const char* field, std::uint64_t p) {
      return Error(ErrorCode::kInvalidArgument,
                   std::string(field) + " names position " + std::to_string(p) + " for old rank " + std::to_string(r) +
                       ", whose epoch has " + std::to_string(size) + " samples",
                   "resume state");
    };
    if (start.old_positions[r] > size) return past("old_positions", start.old_positions[r]);
    if (r < start.old_windows.size()) {
      for (std::uint64_t p : start.old_windows[r]) {
        if (p >= size) return past("old_windows", p);
      }
    }
  }
  return {};
}

}  // namespace

Result<LoaderState> start_state(const LoaderConfig& config, const dataset::Manifests& manifests,
                                const Population& population, std::optional<LoaderState> resume) {
  LoaderState start;
  start.seed = config.seed;
  start.rank = config.rank;
  start.world_size = config.world_size;
  start.fingerprint = fingerprint_of(config, manifests, population.epoch_length());
  if (resume) {
    if (const std::string diff = fingerprint_mismatch(resume->fingerprint, start.fingerprint); !diff.empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   "the resume state was taken over another run: " + diff +
                       ". Resume with the data and options it was taken with, or start afresh without it",
                   "resume state");
    }
    if (resume->seed != config.seed)
      return config_error("seed", "the resume state was taken with seed " + std::to_string(resume->seed));
    if (resume->world_size != config.world_size) {
      return config_error("world_size", "the resume state was taken as rank " + std::to_string(resume->rank) + " of " +
                                            std::to_string(resume->world_size) +
                                            "; for another world size, derive each new rank's state from all old "
                                            "ranks' states with LoaderState::reshard");
    }
    if (resume->rank != config.rank) {
      return config_error("rank", "the resume state is rank " + std::to_string(resume->rank) + "'s, not rank " +
                                      std::to_string(config.rank) + "'s: give each rank its own state");
    }
    auto fingerprint = std::move(start.fingerprint);
    start = *resume;
    start.fingerprint = std::move(fingerprint);
    if (start.epoch >= config.epochs) {
      return Error(ErrorCode::kInvalidArgument,
                   "the resume state is in epoch " + std::to_string(start.epoch) + ", past this run's " +
                       std::to_string(config.epochs) + " epoch" + (config.epochs == 1 ? "" : "s"),
                   "resume state");
    }
    if ((!start.cost_switches.empty() || !start.old_cost_switches.empty()) && config.balance != Balance::kCompute) {
      return config_error("balance",
                          "the resume state recalibrated balance=\"compute\"'s cost model "
                          "(balance_switches); resume it with balance=\"compute\"");
    }
    const std::uint64_t n = population.epoch_length();
    MMFEED_RETURN_IF_ERROR(check_old_positions(config, start, n));  // before the resharded order is built
    const std::uint64_t epoch_size = run_order(population, order_options(config), start, start.epoch).size();
    if (start.position > epoch_size) {
      return Error(ErrorCode::kInvalidArgument,
                   "the resume state is at position " + std::to_string(start.position) + " of epoch " +
                       std::to_string(start.epoch) + ", which has " + std::to_string(epoch_size) +
                       " samples for this rank",
                   "resume state");
    }
    if (start.packed_delivered > 0 && config.token_budget == 0) {
      return Error(ErrorCode::kInvalidArgument, "the resume state is inside a packing window, but token_budget is 0",
                   "resume state");
    }
    for (const auto* list : {&start.window_delivered}) {
      for (std::uint64_t p : *list) {
        if (p >= n)
          return Error(ErrorCode::kInvalidArgument,
                       "window_delivered names position " + std::to_string(p) + " of " + std::to_string(n),
                       "resume state");
      }
    }
  }
  if (!config.ordered && (start.epoch != 0 || start.position != 0 || start.packed_delivered != 0)) {
    return config_error("ordered", "an unordered run cannot be resumed (its order depends on timing)");
  }
  if (config.mode == Mode::kSerial && (start.epoch != 0 || start.position != 0 || start.packed_delivered != 0)) {
    return config_error("mode", "resuming is supported in the concurrent mode only");
  }
  return start;
}

}  // namespace pipeline
}  // namespace mmfeed
