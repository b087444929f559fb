// The Loader's configuration, checked once: every option of LoaderConfig against its range (each
// error names the field, "LoaderConfig.workers: must be 1 to 1024, not 0"), the fixed choices
// turned into enums, and the stages' own configurations (the image processor's profile, the chat
// template, the SFT options) built from them. What needs the manifests (the resume state's
// checks) is in resume_state.h.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Settings settings, check_config(config));
//   text::ChatTemplate t = settings.chat_template;
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <optional>

#include "audio/profile.h"
#include "core/models.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "pipeline/order.h"
#include "pipeline/stage_options.h"
#include "text/chat_encode.h"
#include "vision/image_transform.h"
#include "vision/video_processor.h"

namespace mmfeed::pipeline {

struct Settings {
  // As given, workers and pin_device resolved: the Loader's own (its fetcher, inputs, state). The
  // stages read theirs below (stage_options.h).
  LoaderConfig options;
  OrderOptions order;
  SampleOptions sample;
  BatchOptions batch;
  DriveOptions drive;
  const ModelRow* model = nullptr;  // LoaderConfig::model's row (core/models.h)
  vision::ProcessorConfig vision;
  vision::VideoProfile video;  // the model's video recipe
  text::ChatTemplate chat_template = text::ChatTemplate::kQwen2VL;
  text::SftOptions sft;
  std::optional<audio::AudioModel> audio;  // the model's audio profile (the Omni models); none: no audio
  // One per manifest when source_max_pixels / source_chat_template are given; else empty.
  std::vector<vision::ProcessorConfig> source_vision;
  std::vector<text::ChatTemplate> source_templates;
};

// workers = 0 ("auto"): this rank's share of the CPUs the process may use (`usable_cpus`, shared
// by the LOCAL_WORLD_SIZE ranks of the node when set), less one for the rank's trainer; at least 1.
int auto_workers(int usable_cpus, const char* local_world_size);

// Checks `config` and builds its Settings (workers = 0 resolved); the first option out of range
// is the error.
Result<Settings> check_config(const LoaderConfig& config);

// What the run's order reads of `config` (Settings::order; resume_state.cc's checks, before Settings).
OrderOptions order_options(const LoaderConfig& config);

// An error about option `field`: its context is "LoaderConfig.<field>".
Error config_error(const std::string& field, const std::string& message);

}  // namespace mmfeed::pipeline
