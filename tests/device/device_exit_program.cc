// A program that ends the way a training script does: its last batches, host and device, still
// held by objects that outlive main() (here two globals, destroyed after every atexit handler
// registered later, the CUDA runtime's teardown among them). Run by device_copy_test against the
// test CUDA runtime, which aborts on any call after its teardown; it must exit 0.
//
// Usage: device_exit_program MANIFEST TOKENIZER
#include <cstdio>
#include <optional>

#include "mmfeed/loader.h"
#include "pipeline/device_copy.h"

namespace {
std::optional<mmfeed::Batch> kept_host;  // constructed before the runtime starts
std::optional<mmfeed::Batch> kept_device;
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MANIFEST TOKENIZER\n", argv[0]);
    return 2;
  }
  mmfeed::LoaderConfig config;
  config.manifests = {argv[1]};
  config.tokenizer = argv[2];
  config.batch_size = 2;
  config.workers = 2;
  auto host = mmfeed::Loader::open(config);
  auto device = mmfeed::Loader::open(config);
  if (!host.ok() || !device.ok()) {
    std::fprintf(stderr, "open: %s\n", (!host.ok() ? host.error() : device.error()).to_string().c_str());
    return 1;
  }
  auto first = (*host)->next();
  if (!first.ok() || !first->has_value()) return 1;
  kept_host = std::move(**first);
  auto copy = mmfeed::pipeline::DeviceCopy::start(**device, 0, 2, 64 << 20);
  if (!copy.ok()) {
    std::fprintf(stderr, "copy: %s\n", copy.error().to_string().c_str());
    return 1;
  }
  bool timed_out = true;
  mmfeed::Result<std::optional<mmfeed::Batch>> on_device = mmfeed::Error(mmfeed::ErrorCode::kInternal, "unset");
  while (timed_out) on_device = (*copy)->next_for(std::chrono::milliseconds(100), &timed_out, nullptr);
  if (!on_device.ok() || !on_device->has_value()) return 1;
  kept_device = std::move(**on_device);
  // The loaders and the stage end before the batches, as they do when Python's garbage
  // collector or a static destructor frees the last tensor.
  if (!(*device)->close().ok()) return 1;
  (*copy)->close();
  copy->reset();
  host->reset();
  device->reset();
  return 0;
}
