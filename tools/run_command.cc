// mmfeed run: run the Loader over a manifest and report what it delivered and what it cost:
// samples/s, tokens, images and videos, the consumer's wait share (with an optional simulated trainer
// step), skipped samples with their reasons, per-stage metrics; a Perfetto trace on request.
#include <simdjson.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/json.h"
#include "core/numbers.h"
#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"
#include "tools/commands.h"

namespace mmfeed::tools {

namespace {

// The tokens of a batch's samples, its padding left out: the attention mask's ones (padded), or
// where the packed row's last sample ends (cu_seq_lens_q counts the row's tail as a sequence).
std::uint64_t sample_tokens(const Batch& b) {
  if (const Tensor* mask = b.find("attention_mask")) {
    const auto* m = static_cast<const std::int64_t*>(b.data(*mask));
    std::uint64_t n = 0;
    for (std::int64_t i = 0; i < mask->shape[0] * mask->shape[1]; ++i) n += static_cast<std::uint64_t>(m[i]);
    return n;
  }
  const Tensor* cu = b.find("cu_seqlens");  // Megatron's: the samples' own lengths
  if (cu == nullptr) cu = b.find("cu_seq_lens_q");
  return static_cast<std::uint64_t>(static_cast<const std::int32_t*>(b.data(*cu))[b.sample_ids.size()]);
}

// The longest simulated trainer step --step-ms takes: a day, far past any real step, and well
// inside what the sleep's microseconds hold.
constexpr double kMaxStepMs = 86'400'000;

// Flags that are not `--<option name with dashes>`: the short names the CLI has always taken.
constexpr std::pair<std::string_view, std::string_view> kFlagAliases[] = {{"manifest", "manifests"},
                                                                          {"prefetch", "prefetch_batches"},
                                                                          {"inflight", "fetch_inflight"},
                                                                          {"trace", "trace_path"},
                                                                          {"unordered", "no-ordered"}};

// The usage, with one line per loader option from the option table (mmfeed/loader_options.h).
std::string run_usage() {
  std::string out =
      "usage: mmfeed run [options] MANIFEST...\n"
      "\n"
      "Runs the loader over JSONL manifests and prints samples/s, tokens, images and videos, the\n"
      "share of time the consumer waited, skipped samples and per-stage metrics.\n"
      "\n"
      "options:\n"
      "  --config FILE          loader options as a JSON object or a TOML table (*.toml): the\n"
      "                         options below, with _ or -; later flags override it; a blend's\n"
      "                         `sources`: a list of {manifest, weight, media_root, max_pixels,\n"
      "                         chat_template} tables\n"
      "  --step-ms MS           simulate a trainer step of MS per batch (default 0)\n"
      "  --json                 print the summary as JSON\n"
      "  --ray ADDRESS          run the per-sample work on Ray actors (mmfeed.ray.Loader): a cluster's\n"
      "                         HOST:PORT, auto (the one this machine joined), or local (a Ray\n"
      "                         instance started here); the same batches, and each actor's figures\n"
      "  --ray-actors N         actors (default 1)\n"
      "  --ray-actor-cpus C     CPUs Ray reserves for each actor (default 1; give --workers to match)\n"
      "  --ray-store-bytes B    object-store bytes the untaken batches may hold (default: bounded in\n"
      "                         batches only)\n"
      "\n"
      "loader options (--name VALUE; a yes/no option as --name or --no-name; aliases: --manifest,\n"
      "--prefetch, --inflight, --trace, --unordered):\n";
  for (const LoaderOptionInfo& o : loader_options()) {
    std::string flag = "--" + o.name;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    const std::string value = o.type == "bool" ? "" : " " + (o.type.find('|') != std::string::npos ? o.type : "VALUE");
    out += "  " + flag + value + "\n      " + o.doc +
           (o.default_text.empty() ? "" : " (default " + o.default_text + ")") + "\n";
  }
  return out;
}

// The option a flag or config key names ("batch-size", "batch_size", "prefetch": "prefetch_batches").
std::string option_name(std::string_view key) {
  for (const auto& [alias, name] : kFlagAliases) {
    if (key == alias) return std::string(name);
  }
  std::string name(key);
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

const LoaderOptionInfo* find_option(const std::string& name) {
  static const std::vector<LoaderOptionInfo> options = loader_options();
  for (const LoaderOptionInfo& o : options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

bool is_bool_option(const std::string& name) {
  const LoaderOptionInfo* o = find_option(name);
  return o != nullptr && o->type == "bool";
}

bool is_list_option(const std::string& name) {
  const LoaderOptionInfo* o = find_option(name);
  return o != nullptr && o->type.starts_with("list[");
}

// `key` as a flag or config key names it.
Status apply(LoaderConfig& c, const std::string& key, const std::string& value) {
  const std::string name = option_name(key);
  if (find_option(name) == nullptr) return Error(ErrorCode::kInvalidArgument, "unknown option --" + key);
  return set_loader_option(c, name, value);
}

// A config file's entries as (option name, value) pairs: keys with '-' read as '_', numbers and
// booleans as their text, a list (of a list option) as one entry per item.
using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

// A config's `sources`: one table per manifest with its weight and media root (all optional but
// the manifest; weights for every source or none), as manifests, weights and media_root entries.
struct SourceRow {
  std::optional<std::string> manifest, weight, media_root, max_pixels, chat_template;
};

Status add_sources(ConfigEntries& entries, const std::vector<SourceRow>& rows, const std::string& where) {
  bool weighted = false, rooted = false, sized = false, templated = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].manifest)
      return Error(ErrorCode::kInvalidArgument, "names no manifest", where + "[" + std::to_string(i) + "]");
    weighted = weighted || rows[i].weight.has_value();
    rooted = rooted || rows[i].media_root.has_value();
    sized = sized || rows[i].max_pixels.has_value();
    templated = templated || rows[i].chat_template.has_value();
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (weighted && !rows[i].weight) {
      return Error(ErrorCode::kInvalidArgument, "has no weight while others have one: weigh every source, or none",
                   where + "[" + std::to_string(i) + "]");
    }
    entries.emplace_back("manifests", *rows[i].manifest);
    if (weighted) entries.emplace_back("weights", *rows[i].weight);
    if (rooted) entries.emplace_back("media_root", rows[i].media_root.value_or(""));
    if (sized) entries.emplace_back("source_max_pixels", rows[i].max_pixels.value_or("0"));
    if (templated) entries.emplace_back("source_chat_template", rows[i].chat_template.value_or(""));
  }
  return ok_status();
}

// One source's key, or an error naming it.
Status set_source_key(SourceRow& row, std::string_view key, std::string value, const std::string& where) {
  if (key == "manifest") {
    row.manifest = std::move(value);
  } else if (key == "weight") {
    row.weight = std::move(value);
  } else if (key == "media_root" || key == "media-root") {
    row.media_root = std::move(value);
  } else if (key == "max_pixels" || key == "max-pixels") {
    row.max_pixels = std::move(value);
  } else if (key == "chat_template" || key == "chat-template") {
    row.chat_template = std::move(value);
  } else {
    return Error(ErrorCode::kInvalidArgument,
                 "unknown key '" + std::string(key) +
                     "' (a source takes manifest, weight, media_root, max_pixels and chat_template)",
                 where);
  }
  return ok_status();
}

Result<ConfigEntries> read_json_config(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object obj;
  if (auto err = parser.load(path).get(doc); err) {
    return Error(ErrorCode::kInvalidArgument, std::string("config is not JSON: ") + simdjson::error_message(err), path);
  }
  if (doc.get_object().get(obj)) return Error(ErrorCode::kInvalidArgument, "config is not a JSON object", path);
  ConfigEntries entries;
  for (auto [k, v] : obj) {
    const std::string key = option_name(k);
    std::string_view sv;
    simdjson::dom::array list;
    if (key == "sources") {
      const std::string where = path + ": sources";
      if (v.get_array().get(list)) return Error(ErrorCode::kInvalidArgument, "takes a list of sources", where);
      std::vector<SourceRow> rows;
      for (simdjson::dom::element e : list) {
        const std::string at = where + "[" + std::to_string(rows.size()) + "]";
        simdjson::dom::object source;
        if (e.get_object().get(source)) return Error(ErrorCode::kInvalidArgument, "is not an object", at);
        SourceRow& row = rows.emplace_back();
        for (auto [source_key, source_value] : source) {
          std::string_view text;
          std::string value = !source_value.get_string().get(text) ? std::string(text) : simdjson::minify(source_value);
          MMFEED_RETURN_IF_ERROR(set_source_key(row, source_key, std::move(value), at));
        }
      }
      MMFEED_RETURN_IF_ERROR(add_sources(entries, rows, where));
    } else if (!v.get_string().get(sv)) {
      entries.emplace_back(key, std::string(sv));
    } else if (!v.get_array().get(list)) {
      if (!is_list_option(key))
        return Error(ErrorCode::kInvalidArgument, "takes one value, not a list", path + ": " + key);
      for (simdjson::dom::element e : list) {
        if (!e.get_string().get(sv)) {
          entries.emplace_back(key, std::string(sv));
        } else if (e.is_number()) {
          entries.emplace_back(key, simdjson::minify(e));
        } else {
          return Error(ErrorCode::kInvalidArgument, "a list of strings or numbers, not " + simdjson::minify(e),
                       path + ": " + key);
        }
      }
    } else {
      entries.emplace_back(key, simdjson::minify(v));
    }
  }
  return entries;
}

Result<ConfigEntries> read_toml_config(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return Error(ErrorCode::kInvalidArgument,
                 "config is not TOML: " + std::string(e.description()) + " (line " + std::to_string(at.line) +
                     ", column " + std::to_string(at.column) + ")",
                 path);
  }
  ConfigEntries entries;
  // A value's text: numbers and booleans as written in JSON, strings as they are.
  auto text_of = [](const toml::node& node) -> std::optional<std::string> {
    if (node.is_string()) return *node.value<std::string>();
    if (node.is_integer()) return std::to_string(*node.value<std::int64_t>());
    if (node.is_floating_point()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", *node.value<double>());
      return std::string(text);
    }
    if (node.is_boolean()) return std::string(*node.value<bool>() ? "true" : "false");
    return std::nullopt;
  };
  auto unsupported = [&](const std::string& where) {
    return Error(ErrorCode::kInvalidArgument, "unsupported value (tables and dates are not options)", where);
  };
  for (auto&& [k, node] : table) {
    const std::string key = option_name(k.str());
    if (key == "sources") {
      const std::string where = path + ": sources";
      const toml::array* list = node.as_array();
      if (list == nullptr) return Error(ErrorCode::kInvalidArgument, "takes a list of sources ([[sources]])", where);
      std::vector<SourceRow> rows;
      for (const toml::node& item : *list) {
        const std::string at = where + "[" + std::to_string(rows.size()) + "]";
        const toml::table* source = item.as_table();
        if (source == nullptr) return Error(ErrorCode::kInvalidArgument, "is not a table", at);
        SourceRow& row = rows.emplace_back();
        for (auto&& [source_key, value] : *source) {
          std::optional<std::string> text = text_of(value);
          if (!text) return unsupported(at + "." + std::string(source_key.str()));
          MMFEED_RETURN_IF_ERROR(set_source_key(row, source_key.str(), std::move(*text), at));
        }
      }
      MMFEED_RETURN_IF_ERROR(add_sources(entries, rows, where));
    } else if (const toml::array* list = node.as_array()) {
      if (!is_list_option(key))
        return Error(ErrorCode::kInvalidArgument, "takes one value, not a list", path + ": " + key);
      for (const toml::node& item : *list) {
        std::optional<std::string> text = text_of(item);
        if (!text) return unsupported(path + ": " + key);
        entries.emplace_back(key, std::move(*text));
      }
    } else {
      std::optional<std::string> text = text_of(node);
      if (!text) return unsupported(path + ": " + key);
      entries.emplace_back(key, std::move(*text));
    }
  }
  return entries;
}

Status read_config(LoaderConfig& c, const std::string& path) {
  const bool toml = path.size() >= 5 && path.compare(path.size() - 5, 5, ".toml") == 0;
  MMFEED_ASSIGN_OR_RETURN(ConfigEntries entries, toml ? read_toml_config(path) : read_json_config(path));
  for (const auto& [key, value] : entries) {
    Status st = apply(c, key, value);
    if (!st.ok()) return std::move(st).error().with_context(path);
  }
  return ok_status();
}

// A value as JSON: text, a name, a boolean or a number, or a list of them.
template <class T>
void append_json_value(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    core::append_json_string(out, value);
  } else if constexpr (std::is_enum_v<T>) {
    core::append_json_string(out, choice_name(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    out += text;
  } else if constexpr (std::is_integral_v<T>) {
    out += std::to_string(value);
  } else {  // a list
    out += "[";
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i) out += ",";
      append_json_value(out, value[i]);
    }
    out += "]";
  }
}

// The options of `c` that differ from the defaults, as a JSON object of option names (what
// mmfeed.ray.Loader takes as keywords).
std::string options_json(const LoaderConfig& c) {
  static const LoaderConfig defaults;
  std::string out = "{";
  for_each_loader_option([&](const char* name, auto member, const char*) {
    const auto& value = c.*member;
    if (value == defaults.*member) return;
    if (out.size() > 1) out += ",";
    core::append_json_string(out, name);
    out += ":";
    append_json_value(out, value);
  });
  return out + "}";
}

// The --ray flags, as given (mmfeed.ray_run checks them).
struct RayFlags {
  std::string address;  // empty: not on Ray
  std::string actors = "1";
  std::string actor_cpus = "1";
  std::string store_bytes = "0";  // 0: no byte bound
};

// mmfeed run --ray: the run on Ray actors, by mmfeed.ray_run with the options parsed here.
int run_on_ray(const LoaderConfig& config, const RayFlags& ray, double step_ms, bool json) {
  std::vector<std::string> args{
      "-m",        "mmfeed.ray_run",        "--address",    ray.address,         "--actors",
      ray.actors,  "--actor-cpus",          ray.actor_cpus, "--store-bytes",     ray.store_bytes,
      "--step-ms", std::to_string(step_ms), "--options",    options_json(config)};
  if (json) args.emplace_back("--json");
  return exec_python(args);
}

}  // namespace

int run_loader(int argc, char** argv) {
  LoaderConfig config;
  bool json = false;
  double step_ms = 0;
  RayFlags ray;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(run_usage().c_str(), stdout);
      return 0;
    }
    Status st = ok_status();
    const std::string name = arg.rfind("--", 0) == 0 ? option_name(arg.substr(2)) : "";
    if (arg == "--json") {
      json = true;
    } else if (!name.empty() && is_bool_option(name)) {  // --mrope, or --mrope true|false
      const bool valued =
          i + 1 < argc && (std::string_view(argv[i + 1]) == "true" || std::string_view(argv[i + 1]) == "false");
      st = apply(config, arg.substr(2), valued ? argv[++i] : "true");
    } else if (name.rfind("no_", 0) == 0 && is_bool_option(name.substr(3))) {
      st = apply(config, arg.substr(5), "false");
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) {
        st = Error(ErrorCode::kInvalidArgument, arg + " needs a value");
      } else if (arg == "--config") {
        st = read_config(config, argv[++i]);
      } else if (arg == "--step-ms") {
        auto ms = core::parse_number<double>("--step-ms", argv[++i], 0, kMaxStepMs);
        if (ms.ok())
          step_ms = *ms;
        else
          st = std::move(ms).error();
      } else if (arg == "--ray") {
        ray.address = argv[++i];
      } else if (arg == "--ray-actors") {
        ray.actors = argv[++i];
      } else if (arg == "--ray-actor-cpus") {
        ray.actor_cpus = argv[++i];
      } else if (arg == "--ray-store-bytes") {
        ray.store_bytes = argv[++i];
      } else {
        st = apply(config, arg.substr(2), argv[++i]);
      }
    } else {
      config.manifests.push_back(arg);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "mmfeed run: %s\n\n%s", st.error().to_string().c_str(), run_usage().c_str());
      return 2;
    }
  }
  if (!ray.address.empty()) return run_on_ray(config, ray, step_ms, json);
  if (ray.actors != RayFlags{}.actors || ray.actor_cpus != RayFlags{}.actor_cpus ||
      ray.store_bytes != RayFlags{}.store_bytes) {
    std::fprintf(stderr, "mmfeed run: --ray-actors, --ray-actor-cpus and --ray-store-bytes need --ray ADDRESS\n");
    return 2;
  }
  auto opened = Loader::open(config);
  if (!opened.ok()) {
    std::fprintf(stderr, "mmfeed run: %s\n", opened.error().to_string().c_str());
    return 2;
  }
  std::unique_ptr<Loader> loader = std::move(opened).value();
  const bool live = !json && isatty(STDERR_FILENO);
  const core::Stopwatch clock;
  double waited = 0;
  std::uint64_t batches = 0, samples = 0, tokens = 0, images = 0, videos = 0, video_frames = 0;
  int status = 0;
  while (true) {
    const core::Stopwatch wait;
    auto r = loader->next();
    waited += wait.elapsed_s();
    if (!r.ok()) {
      std::fprintf(stderr, "\nmmfeed run: %s\n", r.error().to_string().c_str());
      status = 1;
      break;
    }
    if (!r->has_value()) break;
    const Batch& b = **r;
    ++batches;
    samples += b.sample_ids.size();
    tokens += sample_tokens(b);
    images += static_cast<std::uint64_t>(b.find("image_grid_thw")->shape[0]);
    if (const Tensor* grids = b.find("video_grid_thw")) {  // frames: temporal groups x temporal_patch_size (2)
      const auto* g = static_cast<const std::int64_t*>(b.data(*grids));
      videos += static_cast<std::uint64_t>(grids->shape[0]);
      for (std::int64_t i = 0; i < grids->shape[0]; ++i) video_frames += static_cast<std::uint64_t>(2 * g[3 * i]);
    }
    if (live) {
      std::fprintf(stderr, "\r  epoch %d  batches %llu  samples %llu  %.1f samples/s  waiting %.0f%%   ", b.epoch,
                   static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples),
                   static_cast<double>(samples) / clock.elapsed_s(), 100 * waited / clock.elapsed_s());
    }
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(step_ms * 1000)));
  }
  if (live) std::fputc('\n', stderr);
  const double seconds = clock.elapsed_s();
  const auto errors = loader->errors();
  const std::string metrics = loader->metrics_json();
  if (Status closed = loader->close(); !closed.ok()) {  // the trace could not be written
    std::fprintf(stderr, "mmfeed run: %s\n", closed.error().to_string().c_str());
    status = 1;
  }
  if (json) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"batches\":%llu,\"samples\":%llu,\"tokens\":%llu,\"images\":%llu,\"videos\":%llu,"
                  "\"video_frames\":%llu,\"seconds\":%.3f,\"samples_per_s\":%.2f,\"wait_share\":%.4f,"
                  "\"skipped\":%zu,\"errors\":[",
                  static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples),
                  static_cast<unsigned long long>(tokens), static_cast<unsigned long long>(images),
                  static_cast<unsigned long long>(videos), static_cast<unsigned long long>(video_frames), seconds,
                  static_cast<double>(samples) / seconds, waited / seconds, errors.size());
    std::string out = buf;
    for (std::size_t i = 0; i < errors.size(); ++i) {
      if (i) out += ",";
      out += "{\"sample_id\":";
      core::append_json_string(out, errors[i].sample_id);
      out += ",\"stage\":";
      core::append_json_string(out, errors[i].stage);
      out += ",\"reason\":";
      core::append_json_string(out, errors[i].reason);
      out += "}";
    }
    out += "],\"metrics\":" + metrics + "}\n";
    std::fputs(out.c_str(), stdout);
    return status;
  }
  std::string media = std::to_string(images) + " images";
  if (videos > 0) media += ", " + std::to_string(videos) + " videos of " + std::to_string(video_frames) + " frames";
  std::printf("loaded %llu samples in %llu batches (%llu tokens, %s) in %.2f s: %.1f samples/s\n",
              static_cast<unsigned long long>(samples), static_cast<unsigned long long>(batches),
              static_cast<unsigned long long>(tokens), media.c_str(), seconds, static_cast<double>(samples) / seconds);
  std::printf("the consumer waited %.0f%% of the run%s\n", 100 * waited / seconds,
              step_ms > 0 ? " (with the simulated trainer step)" : " (no trainer step: it only waits)");
  std::printf("skipped %zu samples\n", errors.size());
  for (std::size_t i = 0; i < errors.size() && i < 10; ++i) {
    std::printf("  %s [%s] %s\n", errors[i].sample_id.c_str(), errors[i].stage.c_str(), errors[i].reason.c_str());
  }
  if (!config.trace_path.empty() && status == 0) {
    std::printf("trace written to %s (open it in ui.perfetto.dev)\n", config.trace_path.c_str());
  }
  return status;
}

}  // namespace mmfeed::tools
