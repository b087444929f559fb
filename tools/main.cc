// mmfeed: the command-line face of the engine.
//
//   mmfeed version                       this build and the native libraries it runs on
//   mmfeed run MANIFEST --tokenizer F    run the loader, report throughput, waiting and skipped samples
//   mmfeed inspect MANIFEST --tokenizer F  show a batch, trained spans marked
//   mmfeed fetch URI...                  fetch objects, report throughput, latency and failures
//   mmfeed make-dataset --out DIR ...    write the deterministic demo data set
//   mmfeed bench [--quick]               mmfeed against the Python pipelines, feeding a trainer
//
// Subcommands implemented in Python (the data set generator, the benchmark) run the interpreter this build
// was configured with, or $MMFEED_PYTHON.
#include <unistd.h>

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
    "  fetch           fetch objects (S3, HTTP, files) and report throughput; --help for options\n"
    "  make-dataset    write the demo data set (images + JSONL manifest); --help for options\n"
    "  bench           feed a trainer from an object store: mmfeed against the Python pipelines\n"
    "  help            print this text\n";

int run_version() {
  std::printf("mmfeed %.*s\n", static_cast<int>(mmfeed::version().size()), mmfeed::version().data());
  for (const auto& lib : mmfeed::linked_libraries()) {
    std::printf("  %-14s %-10s %s\n", lib.name.c_str(), lib.version.c_str(), lib.detail.c_str());
  }
  return 0;
}

// Replaces this process with `python -m <module> args...`.
int exec_python_module(const char* module, int argc, char** argv) {
  const char* python = std::getenv("MMFEED_PYTHON");
  if (python == nullptr || *python == '\0') python = MMFEED_DEFAULT_PYTHON;
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python));
  args.push_back(const_cast<char*>("-m"));
  args.push_back(const_cast<char*>(module));
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(python, args.data());
  std::fprintf(stderr, "mmfeed: cannot run %s: %s (set MMFEED_PYTHON to a Python with mmfeed installed)\n",
               python, std::strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view command = argv[1];
  if (command == "version" || command == "--version") return run_version();
  if (command == "fetch") return mmfeed::tools::run_fetch(argc - 2, argv + 2);
  if (command == "run") return mmfeed::tools::run_loader(argc - 2, argv + 2);
  if (command == "inspect") return mmfeed::tools::run_inspect(argc - 2, argv + 2);
  if (command == "make-dataset") return exec_python_module("mmfeed.datagen", argc - 2, argv + 2);
  if (command == "bench") return exec_python_module("mmfeed.bench", argc - 2, argv + 2);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "mmfeed: unknown command '%s'\n\n%s", argv[1], kUsage);
  return 2;
}
