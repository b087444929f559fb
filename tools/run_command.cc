// mmfeed run: run the Loader over a manifest and report what it delivered and what it cost:
// samples/s, tokens, images and videos, the consumer's wait share (with an optional simulated trainer
// step), skipped samples with their reasons, per-stage metrics; a Perfetto trace on request.
#include <unistd.h>

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
    if (arg == "--json") {
      json = true;
    } else if (arg == "--step-ms" || arg.rfind("--ray", 0) == 0) {
      if (i + 1 >= argc) {
        st = Error(ErrorCode::kInvalidArgument, arg + " needs a value");
      } else if (arg == "--step-ms") {
        auto ms = parse_number<double>("--step-ms", argv[++i], 0, kMaxStepMs);
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
        st = Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
      }
    } else if (auto applied = apply_loader_flag(config, argc, argv, i)) {
      st = std::move(*applied);
    } else if (arg.rfind("--", 0) == 0) {
      st = Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
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
  const auto started = std::chrono::steady_clock::now();
  double waited = 0;
  std::uint64_t batches = 0, samples = 0, tokens = 0, images = 0, videos = 0, video_frames = 0;
  int status = 0;
  while (true) {
    const auto asked = std::chrono::steady_clock::now();
    auto r = loader->next();
    waited += seconds_since(asked);
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
    if (const Tensor* grids = b.find("image_grid_thw")) images += static_cast<std::uint64_t>(grids->shape[0]);
    if (const Tensor* grids = b.find("video_grid_thw")) {  // frames: temporal groups x temporal_patch_size (2)
      const auto* g = static_cast<const std::int64_t*>(b.data(*grids));
      videos += static_cast<std::uint64_t>(grids->shape[0]);
      for (std::int64_t i = 0; i < grids->shape[0]; ++i) video_frames += static_cast<std::uint64_t>(2 * g[3 * i]);
    }
    if (live) {
      std::fprintf(stderr, "\r  epoch %d  batches %llu  samples %llu  %.1f samples/s  waiting %.0f%%   ", b.epoch,
                   static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples),
                   static_cast<double>(samples) / seconds_since(started), 100 * waited / seconds_since(started));
    }
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(step_ms * 1000)));
  }
  if (live) std::fputc('\n', stderr);
  const double seconds = seconds_since(started);
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
      append_json_string(out, errors[i].sample_id);
      out += ",\"stage\":";
      append_json_string(out, errors[i].stage);
      out += ",\"reason\":";
      append_json_string(out, errors[i].reason);
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
