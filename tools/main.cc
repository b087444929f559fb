// mmfeed: the command-line face of the engine.
//
//   mmfeed version                       this build and the native libraries it runs on
//   mmfeed run MANIFEST --tokenizer F    run the loader, report throughput, waiting and skipped samples
//   mmfeed inspect MANIFEST --tokenizer F  show a batch, trained spans marked
//   mmfeed index SOURCE...               index JSONL/JSON manifests: byte ranges and media a sample
//   mmfeed balance-report MANIFEST...    each step's largest rank cost over the mean, drawn and balanced
//   mmfeed fetch URI...                  fetch objects, report throughput, latency and failures
//   mmfeed make-dataset --out DIR ...    write the deterministic demo data set
//   mmfeed bench [--quick]               mmfeed against the Python pipelines, feeding a trainer
//   mmfeed bench --layouts               JSONL + objects against WebDataset shards, the same samples
//
// Subcommands implemented in Python (the data set generator, the benchmark) are development tools
// that stay in the source tree, not in the wheel: they run tests/support/datagen.py and
// bench/pipeline.py from the checkout this binary was built from (or $MMFEED_SOURCE_DIR) with the
// interpreter this build was configured with (or $MMFEED_PYTHON). Without a checkout they say so.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/build_info.h"
#include "tools/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: mmfeed <command> [options]\n"
    "\n"
    "commands:\n"
    "  version         print the mmfeed version and the native libraries it uses\n"
    "  run             run the loader over a manifest and report what it delivered; --help for options\n"
    "  inspect         show one batch: tensor shapes, decoded text with the trained spans marked\n"
    "  index           index JSONL or JSON manifests (SOURCE.mmidx): each sample's byte range and media\n"
    "  balance-report  each step's largest rank cost over the mean, as drawn and balanced; --help for options\n"
    "  fetch           fetch objects (S3, HTTP, files) and report throughput; --help for options\n"
    "  make-dataset    write the demo data set (images + JSONL manifest); --help for options; needs a checkout\n"
    "  bench           feed a trainer from an object store: mmfeed against the Python pipelines; needs a checkout\n"
    "                  (bench --layouts: JSONL + objects against WebDataset shards, the same samples)\n"
    "  help            print this text\n";

int run_version() {
  std::printf("mmfeed %.*s\n", static_cast<int>(mmfeed::version().size()), mmfeed::version().data());
  for (const auto& lib : mmfeed::linked_libraries()) {
    std::printf("  %-14s %-10s %s\n", lib.name.c_str(), lib.version.c_str(), lib.detail.c_str());
  }
  return 0;
}

// A subcommand that runs a Python script of the source tree.
struct SourceTool {
  const char* command;  // the subcommand, for messages
  const char* script;   // relative to the source tree
  const char* needs;    // what the script needs besides the checkout and mmfeed
};

constexpr SourceTool kMakeDataset{"make-dataset", "tests/support/datagen.py",
                                  "scikit-image and scikit-learn, whose sample photographs it uses"};
constexpr SourceTool kBench{"bench", "bench/pipeline.py",
                            "nginx with its Lua module and the Python peers torch, transformers, spdl, boto3 and "
                            "matplotlib"};
constexpr SourceTool kBenchLayouts{"bench --layouts", "bench/layouts.py",
                                   "nginx with its Lua module, webdataset, scikit-image and scikit-learn"};

// The checkout the Python subcommands run from: $MMFEED_SOURCE_DIR, else the tree this binary was
// built from. A wheel built from an sdist was configured in a temporary directory that is gone.
std::string source_dir() {
  const char* dir = std::getenv("MMFEED_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : MMFEED_SOURCE_DIR;
}

// Replaces this process with `python SOURCE/script args...`; returns 127 with what to do when
// there is no checkout to run it from or no interpreter.
int exec_source_tool(const SourceTool& tool, int argc, char** argv) {
  const std::string dir = source_dir();
  std::string script = dir + "/" + tool.script;
  if (access(script.c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "mmfeed %s: %s not found in %s: this development tool runs from an mmfeed source checkout, "
                 "and the installed package does not ship it.\n"
                 "Run it in a checkout (`make build`, then build/mmfeed %s) or set MMFEED_SOURCE_DIR to one; "
                 "it also needs %s; scripts/setup.sh installs them.\n",
                 tool.command, tool.script, dir.c_str(), tool.command, tool.needs);
    return 127;
  }
  std::vector<std::string> args{script};
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  return mmfeed::tools::exec_python(args);
}

}  // namespace

namespace mmfeed::tools {

int exec_python(const std::vector<std::string>& args) {
  const char* python = std::getenv("MMFEED_PYTHON");
  if (python == nullptr || *python == '\0') python = MMFEED_DEFAULT_PYTHON;
  std::vector<char*> argv{const_cast<char*>(python)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(python, argv.data());
  std::fprintf(stderr, "mmfeed: cannot run %s: %s (set MMFEED_PYTHON to a Python with mmfeed installed)\n", python,
               std::strerror(errno));
  return 127;
}

}  // namespace mmfeed::tools

namespace {

// A command's exit status, made a failure when what it printed did not reach standard output
// (a full disk, a closed pipe): a report that was lost is not a success.
int flushed(int status) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fprintf(stderr, "mmfeed: could not write standard output: %s\n", std::strerror(errno));
    return status == 0 ? 1 : status;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view command = argv[1];
  if (command == "version" || command == "--version") return flushed(run_version());
  if (command == "fetch") return flushed(mmfeed::tools::run_fetch(argc - 2, argv + 2));
  if (command == "run") return flushed(mmfeed::tools::run_loader(argc - 2, argv + 2));
  if (command == "inspect") return flushed(mmfeed::tools::run_inspect(argc - 2, argv + 2));
  if (command == "index") return flushed(mmfeed::tools::run_index(argc - 2, argv + 2));
  if (command == "balance-report") return flushed(mmfeed::tools::run_balance_report(argc - 2, argv + 2));
  if (command == "make-dataset") return exec_source_tool(kMakeDataset, argc - 2, argv + 2);
  if (command == "bench" && argc > 2 && std::string_view(argv[2]) == "--layouts") {
    return exec_source_tool(kBenchLayouts, argc - 3, argv + 3);
  }
  if (command == "bench") return exec_source_tool(kBench, argc - 2, argv + 2);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "mmfeed: unknown command '%s'\n\n%s", argv[1], kUsage);
  return 2;
}
