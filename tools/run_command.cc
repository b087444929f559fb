// mmfeed run: run the Loader over a manifest and report what it delivered and what it cost:
// samples/s, tokens, images and videos, the consumer's wait share (with an optional simulated trainer
// step), skipped samples with their reasons, per-stage metrics; a Perfetto trace on request.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "mmfeed/config_file.h"
#include "mmfeed/json.h"
#include "mmfeed/loader.h"
#include "mmfeed/numbers.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"

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

// The usage, with one line per loader option from the option table (mmfeed/loader_options.h).
std::string run_usage() {
  std::string out =
      "usage: mmfeed run [options] MANIFEST...\n"
      "\n"
      "Runs the loader over its sources (JSONL or JSON manifests, tar shards, Energon, Parquet or\n"
      "Arrow files; a file, brace pattern, glob or folder each) and prints samples/s, tokens, images\n"
      "and videos, the share of time the consumer waited, skipped samples and per-stage metrics.\n"
      "\n"
      "options:\n"
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
  return out + loader_flags_usage();
}

// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  std::vector<std::string> args{"-m",
                                "mmfeed.ray_run",
                                "--address",
                                ray.address,
                                "--actors",
                                ray.actors,
                                "--actor-cpus",
                                ray.actor_cpus,
                                "--store-bytes",
                                ray.store_bytes,
                                "--step-ms",
                                std::to_string(step_ms),
                                "--options",
                                changed_options_json(config)};
  if (json) args.emplace_back("--json");
  return exec_python(args);
}

// What `mmfeed run` was asked: the Loader's options and the command's own flags.
struct RunFlags {
  LoaderConfig config;
  bool json = false;
  double step_ms = 0;
  RayFlags ray;
};

// The command's own flags (--json, --step-ms, --ray*); nullopt when argv[i] is not one of them.
std::optional<Status> apply_run_flag(RunFlags& flags, int argc, char** argv, int& i) {
  const std::string arg = argv[i];
  if (arg == "--json") {
    flags.json = true;
    return ok_status();
  }
  if (arg != "--step-ms" && arg.rfind("--ray", 0) != 0) return std::nullopt;
  if (i + 1 >= argc) return Error(ErrorCode::kInvalidArgument, arg + " needs a value");
  const char* value = argv[++i];
  if (arg == "--step-ms") {
    auto ms = parse_number<double>("--step-ms", value, 0, kMaxStepMs);
    if (!ms.ok()) return std::move(ms).error();
    flags.step_ms = *ms;
  } else if (arg == "--ray") {
    flags.ray.address = value;
  } else if (arg == "--ray-actors") {
    flags.ray.actors = value;
  } else if (arg == "--ray-actor-cpus") {
    flags.ray.actor_cpus = value;
  } else if (arg == "--ray-store-bytes") {
    flags.ray.store_bytes = value;
  } else {
    return Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
  }
  return ok_status();
}

// Every argument: a flag of the command's, a Loader option, or a manifest.
Status parse_run_args(RunFlags& flags, int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    std::optional<Status> st = apply_run_flag(flags, argc, argv, i);
    if (!st) st = apply_loader_flag(flags.config, argc, argv, i);
    if (!st && arg.rfind("--", 0) == 0) st = Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
    if (!st) flags.config.manifests.push_back(arg);
    if (st && !st->ok()) return std::move(*st);
  }
  return ok_status();
}

// What a run delivered, and how long the consumer waited for it.
struct RunTotals {
  std::uint64_t batches = 0, samples = 0, tokens = 0, images = 0, videos = 0, video_frames = 0;
  double seconds = 0, waited = 0;
  int status = 0;  // the command's exit status
  std::vector<SampleError> errors;
  std::string metrics;
};

void count_batch(RunTotals& t, const Batch& b) {
  ++t.batches;
  t.samples += b.sample_ids.size();
  t.tokens += sample_tokens(b);
  if (const Tensor* grids = b.find("image_grid_thw")) t.images += static_cast<std::uint64_t>(grids->shape[0]);
  if (const Tensor* grids = b.find("video_grid_thw")) {  // frames: temporal groups x temporal_patch_size (2)
    const auto* g = static_cast<const std::int64_t*>(b.data(*grids));
    t.videos += static_cast<std::uint64_t>(grids->shape[0]);
    for (std::int64_t i = 0; i < grids->shape[0]; ++i) t.video_frames += static_cast<std::uint64_t>(2 * g[3 * i]);
  }
}

// Takes every batch (sleeping step_ms after each, as a trainer's step would), showing progress on
// a terminal, then closes the loader.
RunTotals drain(Loader& loader, double step_ms, bool live) {
  RunTotals t;
  const auto started = std::chrono::steady_clock::now();
  while (true) {
    const auto asked = std::chrono::steady_clock::now();
    auto r = loader.next();
    t.waited += seconds_since(asked);
    if (!r.ok()) {
      std::fprintf(stderr, "\nmmfeed run: %s\n", r.error().to_string().c_str());
      t.status = 1;
      break;
    }
    if (!r->has_value()) break;
    count_batch(t, **r);
    if (live) {
      std::fprintf(stderr, "\r  epoch %d  batches %llu  samples %llu  %.1f samples/s  waiting %.0f%%   ", (*r)->epoch,
                   static_cast<unsigned long long>(t.batches), static_cast<unsigned long long>(t.samples),
                   static_cast<double>(t.samples) / seconds_since(started), 100 * t.waited / seconds_since(started));
    }
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(step_ms * 1000)));
  }
  if (live) std::fputc('\n', stderr);
  t.seconds = seconds_since(started);
  t.errors = loader.errors();
  t.metrics = loader.metrics_json();
  if (Status closed = loader.close(); !closed.ok()) {  // the trace could not be written
    std::fprintf(stderr, "mmfeed run: %s\n", closed.error().to_string().c_str());
    t.status = 1;
  }
  return t;
}

void print_json(const RunTotals& t) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"batches\":%llu,\"samples\":%llu,\"tokens\":%llu,\"images\":%llu,\"videos\":%llu,"
                "\"video_frames\":%llu,\"seconds\":%.3f,\"samples_per_s\":%.2f,\"wait_share\":%.4f,"
                "\"skipped\":%zu,\"errors\":[",
                static_cast<unsigned long long>(t.batches), static_cast<unsigned long long>(t.samples),
                static_cast<unsigned long long>(t.tokens), static_cast<unsigned long long>(t.images),
                static_cast<unsigned long long>(t.videos), static_cast<unsigned long long>(t.video_frames), t.seconds,
                static_cast<double>(t.samples) / t.seconds, t.waited / t.seconds, t.errors.size());
  std::string out = buf;
  for (std::size_t i = 0; i < t.errors.size(); ++i) {
    if (i) out += ",";
    out += "{\"sample_id\":";
    append_json_string(out, t.errors[i].sample_id);
    out += ",\"stage\":";
    append_json_string(out, t.errors[i].stage);
    out += ",\"reason\":";
    append_json_string(out, t.errors[i].reason);
    out += "}";
  }
  out += "],\"metrics\":" + t.metrics + "}\n";
  std::fputs(out.c_str(), stdout);
}

void print_summary(const RunTotals& t, const RunFlags& flags) {
  std::string media = std::to_string(t.images) + " images";
  if (t.videos > 0) {
    media += ", " + std::to_string(t.videos) + " videos of " + std::to_string(t.video_frames) + " frames";
  }
  std::printf("loaded %llu samples in %llu batches (%llu tokens, %s) in %.2f s: %.1f samples/s\n",
              static_cast<unsigned long long>(t.samples), static_cast<unsigned long long>(t.batches),
              static_cast<unsigned long long>(t.tokens), media.c_str(), t.seconds,
              static_cast<double>(t.samples) / t.seconds);
  std::printf("the consumer waited %.0f%% of the run%s\n", 100 * t.waited / t.seconds,
              flags.step_ms > 0 ? " (with the simulated trainer step)" : " (no trainer step: it only waits)");
  std::printf("skipped %zu samples\n", t.errors.size());
  for (std::size_t i = 0; i < t.errors.size() && i < 10; ++i) {
    std::printf("  %s [%s] %s\n", t.errors[i].sample_id.c_str(), t.errors[i].stage.c_str(), t.errors[i].reason.c_str());
  }
  if (!flags.config.trace_path.empty() && t.status == 0) {
    std::printf("trace written to %s (open it in ui.perfetto.dev)\n", flags.config.trace_path.c_str());
  }
}

}  // namespace

int run_loader(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(run_usage().c_str(), stdout);
      return 0;
    }
  }
  RunFlags flags;
  if (Status st = parse_run_args(flags, argc, argv); !st.ok()) {
    std::fprintf(stderr, "mmfeed run: %s\n\n%s", st.error().to_string().c_str(), run_usage().c_str());
    return 2;
  }
  if (!flags.ray.address.empty()) return run_on_ray(flags.config, flags.ray, flags.step_ms, flags.json);
  if (flags.ray.actors != RayFlags{}.actors || flags.ray.actor_cpus != RayFlags{}.actor_cpus ||
      flags.ray.store_bytes != RayFlags{}.store_bytes) {
    std::fprintf(stderr, "mmfeed run: --ray-actors, --ray-actor-cpus and --ray-store-bytes need --ray ADDRESS\n");
    return 2;
  }
  auto opened = Loader::open(flags.config);
  if (!opened.ok()) {
    std::fprintf(stderr, "mmfeed run: %s\n", opened.error().to_string().c_str());
    return 2;
  }
  const RunTotals totals = drain(**opened, flags.step_ms, !flags.json && isatty(STDERR_FILENO));
  if (flags.json) {
    print_json(totals);
  } else {
    print_summary(totals, flags);
  }
  return totals.status;
}

}  // namespace mmfeed::tools
