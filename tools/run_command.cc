// mmfeed run: run the Loader over a manifest and report what it delivered and what it cost:
// samples/s, tokens, images, the consumer's wait share (with an optional simulated trainer
// step), skipped samples with their reasons, per-stage metrics; a Perfetto trace on request.
#include <simdjson.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/json.h"
#include "mmfeed/loader.h"
#include "tools/commands.h"

namespace mmfeed::tools {

namespace {

constexpr const char* kRunUsage =
    "usage: mmfeed run [options] MANIFEST...\n"
    "\n"
    "Runs the loader over JSONL manifests and prints samples/s, tokens, images, the share of\n"
    "time the consumer waited, skipped samples and per-stage metrics.\n"
    "\n"
    "options:\n"
    "  --config FILE          loader options as a JSON object or a TOML table (*.toml): the\n"
    "                         keys below, with _ or -; later flags override it\n"
    "  --tokenizer FILE       tokenizer.json (required)\n"
    "  --model NAME           qwen2-vl (default), qwen2.5-vl, qwen3-vl\n"
    "  --min-pixels N, --max-pixels N\n"
    "  --batch-size N         (default 8)     --epochs N (default 1)    --seed N (default 0)\n"
    "  --no-shuffle           keep manifest order\n"
    "  --chat-template NAME   (default: the model's)\n"
    "  --token-budget N       pack samples into rows of at most N tokens   --pack-window N (64)\n"
    "  --pad-to-multiple-of N round the sequence length up to a multiple of N\n"
    "  --mrope                add 3-D rotary position_ids\n"
    "  --unordered            batches take samples as they finish (no resume)\n"
    "  --max-buffered-bytes N (default 2 GiB)   --no-pin-memory\n"
    "  --max-object-bytes N   largest image fetched (default 512 MiB)\n"
    "  --max-manifest-bytes N largest manifest, decompressed (default 4 GiB)\n"
    "  --max-images-per-sample N (default 256)\n"
    "  --pin-device N         GPU that page-locks batch buffers (default -1: LOCAL_RANK, else 0)\n"
    "  --labels qwen|content_and_eos   --max-error-fraction F (default 0.5)\n"
    "  --no-train-reasoning   leave the Thinking template's <think> block untrained\n"
    "  --rank R --world-size W   --shard-remainder pad|drop|keep (default pad: equal shards)\n"
    "  --mode MODE            concurrent (default) or serial\n"
    "  --workers N            CPU threads (default 2)   --prefetch N batches (default 4)\n"
    "  --inflight N           fetches in flight (default 64)\n"
    "  --max-length N         tokens per sample; --truncation error|truncate\n"
    "  --on-error skip|fail   (default skip)\n"
    "  --step-ms MS           simulate a trainer step of MS per batch (default 0)\n"
    "  --trace FILE           write a Chrome-trace / Perfetto timeline\n"
    "  --json                 print the summary as JSON\n";

Status apply(LoaderConfig& c, const std::string& key, const std::string& value) {
  auto num = [&](auto* out, long long min = 0) -> Status {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0' || v < min || errno == ERANGE) {
      return Error(ErrorCode::kInvalidArgument, key + " needs a number from " + std::to_string(min));
    }
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
    return ok_status();
  };
  auto flag = [&](bool* out) -> Status {
    if (value != "true" && value != "false") return Error(ErrorCode::kInvalidArgument, key + " must be true or false");
    *out = value == "true";
    return ok_status();
  };
  if (key == "tokenizer") c.tokenizer = value;
  else if (key == "model") c.model = value;
  else if (key == "min-pixels") return num(&c.min_pixels);
  else if (key == "max-pixels") return num(&c.max_pixels);
  else if (key == "batch-size") return num(&c.batch_size);
  else if (key == "epochs") return num(&c.epochs);
  else if (key == "seed") return num(&c.seed);
  else if (key == "rank") return num(&c.rank);
  else if (key == "world-size") return num(&c.world_size);
  else if (key == "shard-remainder") c.shard_remainder = value;
  else if (key == "mode") c.mode = value;
  else if (key == "workers") return num(&c.workers);
  else if (key == "prefetch") return num(&c.prefetch_batches);
  else if (key == "inflight") return num(&c.fetch_inflight);
  else if (key == "max-length") return num(&c.max_length);
  else if (key == "truncation") c.truncation = value;
  else if (key == "on-error") c.on_error = value;
  else if (key == "trace") c.trace_path = value;
  else if (key == "chat-template") c.chat_template = value;
  else if (key == "token-budget") return num(&c.token_budget);
  else if (key == "pad-to-multiple-of") return num(&c.pad_to_multiple_of);
  else if (key == "pack-window") return num(&c.pack_window);
  else if (key == "max-buffered-bytes") return num(&c.max_buffered_bytes);
  else if (key == "max-object-bytes") return num(&c.max_object_bytes);
  else if (key == "max-manifest-bytes") return num(&c.max_manifest_bytes);
  else if (key == "max-images-per-sample") return num(&c.max_images_per_sample);
  else if (key == "labels") c.labels = value;
  else if (key == "max-error-fraction") {
    char* end = nullptr;
    c.max_error_fraction = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || c.max_error_fraction < 0 || c.max_error_fraction > 1) {
      return Error(ErrorCode::kInvalidArgument, key + " needs a number in [0, 1]");
    }
  }
  else if (key == "shuffle") return flag(&c.shuffle);
  else if (key == "mrope") return flag(&c.mrope);
  else if (key == "train-reasoning") return flag(&c.train_reasoning);
  else if (key == "ordered") return flag(&c.ordered);
  else if (key == "pin-memory") return flag(&c.pin_memory);
  else if (key == "pin-device") return num(&c.pin_device, -1);
  else if (key == "manifest") c.manifests.push_back(value);
  else return Error(ErrorCode::kInvalidArgument, "unknown option --" + key);
  return ok_status();
}

// A config file's entries as (flag name, value) pairs: keys with '_' read as '-', numbers and
// booleans as their text, a "manifests" list as one "manifest" entry per item.
using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

std::string flag_name(std::string_view key) {
  std::string name(key);
  for (char& ch : name) ch = ch == '_' ? '-' : ch;
  if (name == "prefetch-batches") name = "prefetch";
  if (name == "fetch-inflight") name = "inflight";
  if (name == "manifests") name = "manifest";
  return name;
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
    const std::string key = flag_name(k);
    std::string_view sv;
    simdjson::dom::array list;
    if (!v.get_string().get(sv)) {
      entries.emplace_back(key, std::string(sv));
    } else if (!v.get_array().get(list)) {
      if (key != "manifest") return Error(ErrorCode::kInvalidArgument, "only manifests may be a list", path + ": " + key);
      for (simdjson::dom::element e : list) {
        if (e.get_string().get(sv)) return Error(ErrorCode::kInvalidArgument, "manifests must be strings", path);
        entries.emplace_back(key, std::string(sv));
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
  Status status = ok_status();
  auto scalar = [&](const std::string& key, const toml::node& node) {
    if (node.is_string()) {
      entries.emplace_back(key, *node.value<std::string>());
    } else if (node.is_integer()) {
      entries.emplace_back(key, std::to_string(*node.value<std::int64_t>()));
    } else if (node.is_floating_point()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", *node.value<double>());
      entries.emplace_back(key, text);
    } else if (node.is_boolean()) {
      entries.emplace_back(key, *node.value<bool>() ? "true" : "false");
    } else if (status.ok()) {
      status = Error(ErrorCode::kInvalidArgument, "unsupported value (tables and dates are not options)",
                     path + ": " + key);
    }
  };
  for (auto&& [k, node] : table) {
    const std::string key = flag_name(k.str());
    if (const toml::array* list = node.as_array()) {
      if (key != "manifest") return Error(ErrorCode::kInvalidArgument, "only manifests may be a list", path + ": " + key);
      for (const toml::node& item : *list) {
        if (!item.is_string()) return Error(ErrorCode::kInvalidArgument, "manifests must be strings", path);
        scalar(key, item);
      }
    } else {
      scalar(key, node);
    }
  }
  if (!status.ok()) return status.error();
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

}  // namespace

int run_loader(int argc, char** argv) {
  LoaderConfig config;
  bool json = false;
  double step_ms = 0;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kRunUsage, stdout);
      return 0;
    }
    Status st = ok_status();
    if (arg == "--json") {
      json = true;
    } else if (arg == "--no-shuffle") {
      config.shuffle = false;
    } else if (arg == "--mrope") {
      config.mrope = true;
    } else if (arg == "--unordered") {
      config.ordered = false;
    } else if (arg == "--no-pin-memory") {
      config.pin_memory = false;
    } else if (arg == "--no-train-reasoning") {
      config.train_reasoning = false;
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) {
        st = Error(ErrorCode::kInvalidArgument, arg + " needs a value");
      } else if (arg == "--config") {
        st = read_config(config, argv[++i]);
      } else if (arg == "--step-ms") {
        step_ms = std::atof(argv[++i]);
      } else {
        st = apply(config, arg.substr(2), argv[++i]);
      }
    } else {
      config.manifests.push_back(arg);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "mmfeed run: %s\n\n%s", st.error().to_string().c_str(), kRunUsage);
      return 2;
    }
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
  std::uint64_t batches = 0, samples = 0, tokens = 0, images = 0;
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
    const Tensor* mask = b.find("attention_mask");
    const auto* m = static_cast<const std::int64_t*>(b.data(*mask));
    for (std::int64_t i = 0; i < mask->shape[0] * mask->shape[1]; ++i) tokens += static_cast<std::uint64_t>(m[i]);
    images += static_cast<std::uint64_t>(b.find("image_grid_thw")->shape[0]);
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
  loader->close();
  if (json) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"batches\":%llu,\"samples\":%llu,\"tokens\":%llu,\"images\":%llu,\"seconds\":%.3f,"
                  "\"samples_per_s\":%.2f,\"wait_share\":%.4f,\"skipped\":%zu,\"errors\":[",
                  static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples),
                  static_cast<unsigned long long>(tokens), static_cast<unsigned long long>(images), seconds,
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
  std::printf("loaded %llu samples in %llu batches (%llu tokens, %llu images) in %.2f s: %.1f samples/s\n",
              static_cast<unsigned long long>(samples), static_cast<unsigned long long>(batches),
              static_cast<unsigned long long>(tokens), static_cast<unsigned long long>(images), seconds,
              static_cast<double>(samples) / seconds);
  std::printf("the consumer waited %.0f%% of the run%s\n", 100 * waited / seconds,
              step_ms > 0 ? " (with the simulated trainer step)" : " (no trainer step: it only waits)");
  std::printf("skipped %zu samples\n", errors.size());
  for (std::size_t i = 0; i < errors.size() && i < 10; ++i) {
    std::printf("  %s [%s] %s\n", errors[i].sample_id.c_str(), errors[i].stage.c_str(), errors[i].reason.c_str());
  }
  if (!config.trace_path.empty()) std::printf("trace written to %s (open it in ui.perfetto.dev)\n", config.trace_path.c_str());
  return status;
}

}  // namespace mmfeed::tools
