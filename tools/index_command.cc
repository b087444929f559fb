// mmfeed index: build each manifest's dataset index (include/mmfeed/index.h) and say what it
// found. Exit status 1 when a source could not be indexed, 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mmfeed/index.h"
#include "mmfeed/json.h"
#include "tools/commands.h"

namespace mmfeed::tools {

namespace {

constexpr const char* kIndexUsage =
    "usage: mmfeed index [--out FILE | --cache-dir DIR] [--media-root DIR] [--no-media]\n"
    "                    [--tokenizer FILE [--model NAME] [--chat-template NAME]]\n"
    "                    [--checkpoint-every N | --ray ADDRESS [--ray-parts N] [--ray-task-cpus C]]\n"
    "                    [--json] SOURCE...\n"
    "\n"
    "Indexes each uncompressed JSONL or JSON-array manifest, local or remote (s3://, http(s)://):\n"
    "where each sample's text lies, the images, videos and audio clips it names and their cost facts\n"
    "from the media's headers (an image's size; a video's frame size, frame rate and duration; a\n"
    "clip's duration), bound to the file's size, its mtime (remote: its ETag) and CRC-32. Writes\n"
    "SOURCE.mmidx beside a local SOURCE and prints the samples, media, samples that are no\n"
    "conversation and media that could not be read (named).\n"
    "\n"
    "WebDataset shards (SOURCE a .tar, a brace pattern or glob of them) get the .tar.idx that\n"
    "energon prepare writes, beside each local shard, or in --out DIR (remote shards': upload\n"
    "each beside its shard); a Loader then opens them without reading the shards. A shard whose\n"
    ".tar.idx is current is kept (an interrupted run resumes); a damaged one gets none and is\n"
    "named (exit status 1).\n"
    "\n"
    "Parquet files (SOURCE a .parquet, a brace pattern or glob of them) get FILE.mmidx each,\n"
    "beside each local file or in --out DIR: the rows' text and each image's own byte range (found\n"
    "once, in its page) and size, bound to the file's version; a Loader then opens them without\n"
    "reading them and fetches each image alone. Only images stored uncompressed and PLAIN (as\n"
    "Hugging Face datasets writes them) have such ranges; another file is named (exit status 1).\n"
    "\n"
    "options:\n"
    "  --out FILE        where to write the index (one SOURCE only; default SOURCE.mmidx; a remote\n"
    "                    SOURCE's, uploaded beside it as SOURCE.mmidx, is fetched by Loaders)\n"
    "  --cache-dir DIR   write it where a Loader with cache_dir=DIR looks for SOURCE's index\n"
    "  --media-root DIR  where relative media references resolve (the Loader's media_root)\n"
    "  --no-media        read no medium's header (their facts unknown)\n"
    "  --tokenizer FILE  count each sample's text tokens as the Loader encodes it with this\n"
    "                    tokenizer.json and the chat template (its media's placeholders apart)\n"
    "  --model NAME      whose chat template counts them (default qwen2-vl), as the Loader's model=\n"
    "  --chat-template NAME  the template, where not the model's (the Loader's chat_template=)\n"
    "  --checkpoint-every N  samples described between checkpoints (default 65536): each kept in\n"
    "                    INDEX.journal as it ends, so a stopped run, run again, resumes there\n"
    "  --json            print one JSON object a source instead of text\n"
    "  --ray ADDRESS     describe a manifest's samples in parts on a Ray cluster (HOST:PORT, auto,\n"
    "                    or local), each part a task reading its byte range, then write the index\n"
    "                    here (the same bytes); shards and Parquet files: a task a file; every\n"
    "                    node must reach the source and its media\n"
    "  --ray-parts N     about how many parts (default: 4 a CPU of the cluster; each >= 1 MiB)\n"
    "  --ray-task-cpus C CPUs Ray reserves for each part's task (default 1)\n";

void print_shards(const IndexSummary& s, double seconds) {
  std::printf("%s: %llu samples in %llu %s (%llu indexed now, %llu kept), %llu bytes of %s, %.2f s\n", s.path.c_str(),
              static_cast<unsigned long long>(s.samples),
              static_cast<unsigned long long>(s.shards_indexed + s.shards_kept), s.parquet ? "files" : "shards",
              static_cast<unsigned long long>(s.shards_indexed), static_cast<unsigned long long>(s.shards_kept),
              static_cast<unsigned long long>(s.index_bytes), s.parquet ? "index" : ".tar.idx", seconds);
  if (s.parquet) {
    std::printf("  %llu images placed", static_cast<unsigned long long>(s.images));
    if (s.media_unreadable > 0) {
      std::printf(" (%llu whose header could not be read)", static_cast<unsigned long long>(s.media_unreadable));
    }
    std::printf("\n");
    if (s.shards_damaged > 0) {
      std::printf("  %llu files given no index (a Loader reads them whole):\n",
                  static_cast<unsigned long long>(s.shards_damaged));
    }
  } else {
    if (s.shards_damaged > 0) {
      std::printf("  %llu shards damaged, given no index (a Loader scans this set until they are mended)\n",
                  static_cast<unsigned long long>(s.shards_damaged));
    }
    if (s.bad_count > 0) std::printf("  %llu samples will fail\n", static_cast<unsigned long long>(s.bad_count));
  }
  for (const std::string& b : s.bad) std::printf("    %s\n", b.c_str());
}

void print_text(const IndexSummary& s, double seconds) {
  if (s.parquet || s.shards_indexed + s.shards_kept + s.shards_damaged > 0) return print_shards(s, seconds);
  std::printf(
      "%s: %llu samples (%llu images, %llu videos, %llu audio clips, %llu bytes of text), %llu bytes "
      "of index, %.2f s\n",
      s.path.c_str(), static_cast<unsigned long long>(s.samples), static_cast<unsigned long long>(s.images),
      static_cast<unsigned long long>(s.videos), static_cast<unsigned long long>(s.audio),
      static_cast<unsigned long long>(s.text_bytes), static_cast<unsigned long long>(s.index_bytes), seconds);
  if (s.resumed_samples > 0) {
    std::printf("  %llu samples resumed from a stopped run's journal\n",
                static_cast<unsigned long long>(s.resumed_samples));
  }
  if (s.text_tokens > 0) std::printf("  %llu text tokens\n", static_cast<unsigned long long>(s.text_tokens));
  if (s.bad_count > 0)
    std::printf("  %llu samples are no conversation:\n", static_cast<unsigned long long>(s.bad_count));
  for (const std::string& b : s.bad) std::printf("    %s\n", b.c_str());
  if (s.media_unreadable > 0)
    std::printf("  %llu media could not be read:\n", static_cast<unsigned long long>(s.media_unreadable));
  for (const std::string& u : s.unreadable) std::printf("    %s\n", u.c_str());
  if (s.media_not_probed > 0)
    std::printf("  %llu media not read (--no-media: their facts unknown)\n",
                static_cast<unsigned long long>(s.media_not_probed));
}

void print_json(const IndexSummary& s, double seconds) {
  std::string out = "{\"index\":";
  append_json_string(out, s.path);
  const auto number = [&](const char* key, std::uint64_t v) {
    out += std::string(",\"") + key + "\":" + std::to_string(v);
  };
  number("samples", s.samples);
  number("images", s.images);
  number("videos", s.videos);
  number("audio", s.audio);
  number("text_bytes", s.text_bytes);
  number("text_tokens", s.text_tokens);
  number("index_bytes", s.index_bytes);
  number("bad_count", s.bad_count);
  number("media_unreadable", s.media_unreadable);
  number("media_not_probed", s.media_not_probed);
  number("resumed_samples", s.resumed_samples);
  number("shards_indexed", s.shards_indexed);
  number("shards_kept", s.shards_kept);
  number("shards_damaged", s.shards_damaged);
  const auto strings = [&](const char* key, const std::vector<std::string>& values) {
    out += std::string(",\"") + key + "\":[";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, values[i]);
    }
    out += "]";
  };
  strings("bad", s.bad);
  strings("unreadable", s.unreadable);
  out += ",\"seconds\":" + std::to_string(seconds) + "}";
  std::puts(out.c_str());
}

}  // namespace

namespace {

// mmfeed index --ray ADDRESS: the arguments handed to mmfeed.ray_index (which checks them), the
// --ray flags renamed as it takes them.
int index_on_ray(int argc, char** argv) {
  std::vector<std::string> args{"-m", "mmfeed.ray_index"};
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    args.push_back(arg == "--ray" ? "--address" : arg.starts_with("--ray-") ? "--" + arg.substr(6) : arg);
  }
  return exec_python(args);
}

}  // namespace

int run_index(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--ray") return index_on_ray(argc, argv);
  }
  IndexOptions options;
  bool json = false;
  std::vector<std::string> sources;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kIndexUsage, stdout);
      return 0;
    }
    if (arg == "--json") {
      json = true;
    } else if (arg == "--out" && i + 1 < argc) {
      options.out = argv[++i];
    } else if (arg == "--cache-dir" && i + 1 < argc) {
      options.cache_dir = argv[++i];
    } else if (arg == "--media-root" && i + 1 < argc) {
      options.media_root = argv[++i];
    } else if (arg == "--no-media") {
      options.probe_media = false;
    } else if (arg == "--tokenizer" && i + 1 < argc) {
      options.tokenizer = argv[++i];
    } else if (arg == "--model" && i + 1 < argc) {
      options.model = argv[++i];
    } else if (arg == "--chat-template" && i + 1 < argc) {
      options.chat_template = argv[++i];
    } else if (arg == "--checkpoint-every" && i + 1 < argc) {
      char* end = nullptr;
      const std::string value = argv[++i];
      options.checkpoint_samples = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || value[0] == '-' || options.checkpoint_samples == 0) {
        std::fprintf(stderr, "mmfeed index: --checkpoint-every takes a count of samples, not %s\n", value.c_str());
        return 2;
      }
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "mmfeed index: unknown option %s\n%s", arg.c_str(), kIndexUsage);
      return 2;
    } else {
      sources.push_back(arg);
    }
  }
  if (sources.empty() || (!options.out.empty() && sources.size() > 1)) {
    std::fputs(kIndexUsage, stderr);
    return 2;
  }
  int status = 0;
  for (const std::string& source : sources) {
    const auto start = std::chrono::steady_clock::now();
    auto summary = build_index(source, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!summary.ok()) {
      std::fprintf(stderr, "mmfeed index: %s\n", summary.error().to_string().c_str());
      status = 1;
      continue;
    }
    if (json) {
      print_json(*summary, seconds);
    } else {
      print_text(*summary, seconds);
    }
    if (summary->shards_damaged > 0) status = 1;
  }
  return status;
}

}  // namespace mmfeed::tools
