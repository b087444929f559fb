// The Loader: a JSONL manifest of image and video conversations in, training batches out.
//
// Each rank reads its share of a deterministically shuffled order, fetches the images
// (local, S3, HTTP) with many requests in flight, preprocesses them exactly as the Hugging
// Face Qwen-VL processor, renders and tokenizes the conversation with labels, and assembles
// batches in one pooled buffer, a few batches ahead of the trainer. The order of samples and
// batches is a pure function of (manifests, seed, epoch, rank, world_size) whatever order the
// work completes in; `mode = Mode::kSerial` runs the same work one sample after another (the
// baseline the concurrent mode is measured against).
//
// Example:
//   LoaderConfig config;
//   config.manifests = {"demo-data/manifest.jsonl"};
//   config.tokenizer = "tests/data/qwen3-tokenizer/tokenizer.json";
//   MMFEED_ASSIGN_OR_RETURN(auto loader, Loader::open(config));
//   while (true) {
//     MMFEED_ASSIGN_OR_RETURN(std::optional<Batch> batch, loader->next());
//     if (!batch) break;                       // all epochs done
//     const Tensor* ids = batch->find("input_ids");   // int64 [B, L], in batch->data(*ids)
//   }
//   LoaderState resume_from = loader->state();  // reopen with it to continue exactly here
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"

namespace mmfeed {

// The Loader's own fixed choices, with the names Python and the CLI take (the choices other
// layers share are in choices.h).
enum class Mode { kConcurrent, kSerial };  // serial: every stage on the caller's thread
template <>
struct Choices<Mode> {
  static constexpr std::array<std::string_view, 2> names{"concurrent", "serial"};
};
enum class OnError { kSkip, kFail };
template <>
struct Choices<OnError> {
  static constexpr std::array<std::string_view, 2> names{"skip", "fail"};
};
enum class ShardRemainder { kPad, kDrop, kKeep };
template <>
struct Choices<ShardRemainder> {
  static constexpr std::array<std::string_view, 3> names{"pad", "drop", "keep"};
};
// How each optimizer step's samples are split across the ranks (docs/loading.md, "Ranks balanced
// by compute"): kNone as drawn; kTokens and kCompute by each sample's cost (its tokens; or the
// FLOPs of its tokens and vision patches), the same samples per rank, the largest rank's cost
// least (padded batches a step at a time; packed rows a packing window at a time).
enum class Balance { kNone, kTokens, kCompute };
template <>
struct Choices<Balance> {
  static constexpr std::array<std::string_view, 3> names{"none", "tokens", "compute"};
};
// How a packed row is laid out (token_budget > 0), for the trainer that reads it:
// kHf, transformers': position_ids [4, 1, T] (a text row restarting at 0 for each sample, then
// the three mrope rows), no attention mask, cu_seq_lens_q/k int32 and max_length_q/k for flash
// attention; the samples end to end, the row's tail (pad_to_multiple_of) a sequence of its own.
// kThd, Megatron's: each sample padded to a multiple of pad_to_multiple_of (2 x the context-
// parallel size) at cu_seqlens_padded, labels already shifted (label j is token j + 1's, -100 at
// each sample's last token) with a float32 loss_mask, cu_seqlens / cu_seqlens_padded int32 and
// max_seqlen / max_seqlen_padded: the fields of megatron.core's PackedSeqParams (qkv_format thd).
enum class PackedFormat { kHf, kThd };
template <>
struct Choices<PackedFormat> {
  static constexpr std::array<std::string_view, 2> names{"hf", "thd"};
};

// Every option, with its Python and CLI name and a one-line doc, is listed in loader_options.h.
// The model and the chat template are names (of the profiles and templates the engine has).
struct LoaderConfig {
  // Manifests: JSONL, or one JSON array of samples (.json); paths, file://, s3:// or http(s)://
  // URIs, plain, gzip- or zstd-compressed. Relative media references resolve against media_root,
  // else each manifest's directory or URI prefix.
  std::vector<std::string> manifests;
  // The dataset's media folder (LLaVA's image_folder, LLaMA-Factory's media_dir): a directory or
  // URI prefix for every manifest, or one per manifest (in their order); empty: none.
  std::vector<std::string> media_root;
  // A blend: one weight (>= 0) per manifest. An epoch then draws blend_samples samples (0: the
  // manifests' total), manifest i round(blend_samples * weights[i] / sum) of them (exactly, by
  // running sums), each manifest cycling through its own seeded permutations: no sample of it
  // twice before all of it once. Empty: the manifests are concatenated, an epoch all of them.
  std::vector<double> weights;
  std::uint64_t blend_samples = 0;
  // A blend by repeats instead of weights (Energon's `repetitions`): manifest i drawn
  // source_repeats[i] times its size per epoch (0.5: half of it), the epoch their sum (or
  // blend_samples when given).
  std::vector<double> source_repeats;
  // Per manifest (empty, or one per manifest), for sources prepared differently: its images'
  // max_pixels (0: max_pixels) and its chat template ("": chat_template).
  std::vector<std::int64_t> source_max_pixels;
  std::vector<std::string> source_chat_template;
  std::string tokenizer;           // tokenizer.json
  std::string model = "qwen2-vl";  // image profile: qwen2-vl, qwen2.5-vl, qwen3-vl, qwen3.5, qwen2.5-omni, qwen3-omni
  std::int64_t min_pixels = 0;     // 0: the profile's
  std::int64_t max_pixels = 0;
  Pixels pixels = Pixels::kFloat32;
  ImageBackend image_backend = ImageBackend::kPil;
  AlphaPolicy alpha = AlphaPolicy::kDrop;  // what transparent images become (mmfeed/choices.h)
  std::string chat_template;               // empty: the model's (qwen2-vl for Qwen2/2.5-VL)
  AudioPadding audio_padding = AudioPadding::kModel;
  // qwen2.5-omni: each video brings its soundtrack (the processor's use_audio_in_video), read
  // as qwen-omni-utils reads it and interleaved with the video's tokens; a video without an audio
  // stream keeps its tokens alone. A sample's own "use_audio_in_video" overrides this.
  bool use_audio_in_video = false;
  std::size_t batch_size = 8;  // samples per padded batch
  // > 1: the sequence length (padded: the longest sample; packed: the row) is rounded up to a
  // multiple of this, the extra positions padding (pad id, label -100, mask 0, position 0).
  std::size_t pad_to_multiple_of = 0;
  std::size_t token_budget = 0;  // > 0: pack samples into rows of at most this many tokens
  std::size_t pack_window = 64;  // samples considered together when packing
  PackedFormat packed_format = PackedFormat::kHf;
  // position_ids [3, B, L] (Qwen-VL's 3-D rotary positions; packed: the rows after the text
  // row). On by default: the model needs them, and computing them here (O(tokens), in C++)
  // spares its forward a get_rope_index, a Python loop over every sample of every batch.
  bool mrope = true;
  std::uint64_t seed = 0;
  bool shuffle = true;
  int epochs = 1;
  // > 0: the run ends at this position of its last epoch's order instead of the epoch's end: a
  // multiple of batch_size (of pack_window when packing), so that its batches are the full run's.
  // With a resume state it runs one part of an epoch (mmfeed.ray's actors each run parts); such a
  // run leaves the end-of-run error check to whoever runs the whole.
  std::uint64_t end_position = 0;
  int rank = 0;
  int world_size = 1;
  // When world_size does not divide the samples: kPad (every rank the same count, at most
  // world_size - 1 samples of the epoch twice, as torch's DistributedSampler), kDrop (the same
  // count, at most world_size - 1 left out) or kKeep (disjoint and complete, but the first
  // ranks one sample more: a data-parallel job whose ranks run different step counts hangs).
  ShardRemainder shard_remainder = ShardRemainder::kPad;
  // Each optimizer step takes world_size x gradient_accumulation_steps x batch_size samples as
  // drawn; with balance, they are split across the ranks (and each rank's across its
  // gradient_accumulation_steps batches) by cost, each rank batch_size a batch as before. Packed
  // (token_budget > 0): each packing window's world_size x pack_window samples are split across
  // the ranks by cost, pack_window each, and each rank packs its own into rows.
  Balance balance = Balance::kNone;
  std::size_t gradient_accumulation_steps = 1;
  // kCompute's cost coefficients, FLOPs per LLM token, LLM token pair (attention), vision patch,
  // vision patch pair; empty: Qwen2-VL-7B's forward shape (docs/loading.md).
  std::vector<double> balance_cost;
  Mode mode = Mode::kConcurrent;
  // false: batches take samples as they finish (within the epoch) instead of in order: no
  // waiting for a slow sample, but the order depends on timing and the run cannot be resumed.
  bool ordered = true;
  // CPU threads for decode, resize, normalization and tokenization, 1 to 1024; 0 ("auto"): the
  // cores the process may use (affinity, cgroup quota), shared by the node's LOCAL_WORLD_SIZE
  // ranks, less one for the rank's trainer.
  int workers = 0;
  // Batches prepared ahead of the trainer, 1 to 1024; 0 ("auto"): one, and one more each time the
  // trainer waits for a batch that a deeper queue would have had ready, up to 16 (and the byte
  // budget): memory follows what keeps the trainer fed.
  std::size_t prefetch_batches = 0;
  // Bytes held between the fetch and the trainer (fetched images not yet processed, processed
  // samples waiting for their batch, batches prefetched): the reader admits no new sample past
  // it. A sample that alone would need more (its images' pixel rows, planned from their
  // headers) is refused by name.
  std::size_t max_buffered_bytes = std::size_t{2} << 30;
  std::size_t fetch_inflight = 64;  // GETs in flight, 1 to 4096
  // Limits on sizes that come from outside, checked before memory is committed:
  std::size_t max_object_bytes = std::size_t{512} << 20;  // one image as fetched (declared or read)
  // One manifest, fetched and decompressed (a Parquet file's rows as decoded); also a blend
  // epoch's order, at 20 bytes a draw (blend_samples, source_repeats).
  std::size_t max_manifest_bytes = std::size_t{4} << 30;
  // A node-local folder for dataset indexes: a local JSONL or JSON manifest with no index beside
  // it is indexed here by the first rank of the node that opens it (under a file lock; the
  // node's other ranks wait for it, then open from it), so each node reads the manifest once and
  // every later open reads the index alone. Empty: none (an index beside the manifest is used
  // either way; `mmfeed index` writes one).
  std::string cache_dir;
  std::size_t max_images_per_sample = 256;  // images and videos one sample may name
  // A manifest fetched from http(s):// or s3:// is written by whoever controls that origin: the
  // local files it names (absolute paths, file:// URIs) are refused unless this is true. Local
  // manifests may name anything; relative references in a remote manifest stay remote.
  bool allow_local_media_from_remote_manifest = false;
  std::size_t max_length = 0;  // tokens; 0: no limit
  Truncation truncation = Truncation::kError;
  Labels labels = Labels::kQwen;
  // With the Qwen3-VL Thinking template: train the <think> block it renders (the reply the model
  // learns to produce); false leaves it at -100.
  bool train_reasoning = true;
  OnError on_error = OnError::kSkip;
  // Skipped / seen beyond this fails the run: checked from the 20th sample on, and once more at
  // the end whatever the count (a run whose every sample failed is an error at any size). 0-1.
  double max_error_fraction = 0.5;
  std::string trace_path;  // write a Chrome-trace / Perfetto timeline here on close
  bool pin_memory = true;  // page-locked batch buffers when a CUDA runtime is present
  // The GPU whose context page-locks them; -1: cuda_device when set, else LOCAL_RANK when it names
  // a device, else 0.
  int pin_device = -1;
  // >= 0: batches are delivered on this CUDA device, copied by the engine's copy stage on its own
  // thread and stream, two batches ahead of the trainer (next_for's consumer_stream is the stream
  // that reads them); -1: host batches.
  int cuda_device = -1;
};

// The positions of one group of a run's order: a padded batch's (batch_size), or a packing
// window's (pack_window). A batch holds the good samples of its group; end_position and a run's
// parts (mmfeed.ray) are whole groups.
inline std::size_t group_positions(const LoaderConfig& config) {
  return config.token_budget > 0 ? config.pack_window : config.batch_size;
}

// A recalibration of balance=kCompute's cost model during a run (mmfeed.Loader's
// balance_cost="calibrated"): from step `step` of epoch `epoch` on (a step: the group of every
// rank's samples the plan splits; numbered from 0 in each epoch's order), samples are priced
// with `cost` (balance_cost's order) instead of the run's model. Every rank must hold the same.
struct CostSwitch {
  int epoch = 0;
  std::uint64_t step = 0;
  std::array<double, 4> cost{};

  bool operator==(const CostSwitch&) const = default;
};

// Where a run stands: enough to resume exactly (none lost, none twice). It carries a fingerprint
// of what it resumes (each manifest's size, line count and CRC-32, the seed, shuffle and batching
// options): open() refuses a state whose fingerprint differs from the run's, naming what differs,
// and a position outside the run.
struct LoaderState {
  std::uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  int epoch = 0;
  std::uint64_t position = 0;          // samples of this rank's epoch order consumed by delivered batches
  std::uint64_t packed_delivered = 0;  // packing: rows already delivered from the window at position
  // Packing: the positions (in this rank's order) of the samples those rows held, so that
  // reshard() can count them as consumed.
  std::vector<std::uint64_t> window_delivered;
  // After a change of world size: the positions each rank of the old world had reached in this
  // epoch. This rank's order for the epoch is then the old world's unconsumed samples (in the
  // epoch's order) dealt round-robin over the new world; `position` counts within it.
  int old_world_size = 0;
  std::vector<std::uint64_t> old_positions;
  std::vector<std::vector<std::uint64_t>> old_windows;  // each old rank's window_delivered
  // The cost model's recalibrations so far, in order (CostSwitch); in a resharded epoch, the old
  // world's arrange its order (old_cost_switches) and the new world's this rank's.
  std::vector<CostSwitch> cost_switches;
  std::vector<CostSwitch> old_cost_switches;
  // What the state resumes: (name, value) pairs set by the loader. Empty (a state made by hand):
  // only the ranges are checked.
  std::vector<std::pair<std::string, std::string>> fingerprint;

  std::string to_json() const;
  static Result<LoaderState> from_json(std::string_view json);

  // The state rank `rank` of a new world of `world_size` resumes from, given the states of
  // every rank of the old world (same seed and epoch). The samples none of them consumed are
  // shared out so that the new ranks together deliver exactly them, once (a rank stopped inside
  // a packing window has consumed the samples of the rows it delivered). Refused (with the
  // reason) for incomplete or inconsistent sets.
  static Result<LoaderState> reshard(const std::vector<LoaderState>& old_ranks, int rank, int world_size);

  // The first step (CostSwitch's epoch and step) of this state's epoch none of whose samples it
  // has consumed under `config`: where a recalibration may begin without changing a delivered
  // batch. The ranks of a run recalibrate at the latest of theirs.
  std::pair<int, std::uint64_t> open_step(const LoaderConfig& config) const;
};

struct SampleError {
  std::string sample_id;
  std::string stage;  // manifest, fetch, image, video, text
  std::string reason;
  ErrorCode code = ErrorCode::kCorruptData;  // what failed: not_found, permission_denied, corrupt_data, ...
};

struct Tensor {
  enum class DType { kInt64, kFloat32, kBFloat16, kUInt8, kInt32 };  // bfloat16: uint16 words
  std::string name;
  DType dtype = DType::kInt64;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;  // bytes into the batch storage

  std::size_t bytes() const;
};
// "int64", "float32", "bfloat16", "uint8" or "int32".
std::string_view dtype_name(Tensor::DType dtype);

// One batch: every tensor lives in one pooled buffer, shared by whoever holds the batch (the
// buffer returns to the pool when the last holder lets go).
struct Batch {
  int epoch = 0;
  std::uint64_t index = 0;  // batch number within the epoch, for this rank
  std::vector<std::string> sample_ids;
  // Padded: input_ids, labels, attention_mask, mm_token_type_ids [B, L] (0 text, 1 image pad,
  // 2 video pad), pixel_values, image_grid_thw, position_ids [3, B, L] (mrope). Packed, as
  // PackedFormat says: input_ids, labels, mm_token_type_ids [1, T]; kHf: position_ids [4, 1, T]
  // ([1, T] without mrope), cu_seq_lens_q/k int32; kThd: loss_mask float32 [1, T], position_ids
  // [3, 1, T] ([1, T] without mrope), cu_seqlens and cu_seqlens_padded int32 [n + 1]. Either,
  // when the batch holds a video: pixel_values_videos, video_grid_thw [V, 3] and (for
  // Qwen2.5-VL) second_per_grid_ts [V] float32.
  std::vector<Tensor> tensors;
  // Integers that go with the tensors: packed kHf, max_length_q and max_length_k; kThd,
  // max_seqlen and max_seqlen_padded (the longest sample, before and after its padding).
  std::vector<std::pair<std::string, std::int64_t>> scalars;
  // -1: buffer() is host memory; else the CUDA device it is on (a batch of the copy stage).
  int device = -1;

  const Tensor* find(std::string_view name) const;
  const void* data(const Tensor& t) const { return buffer_ + t.offset; }
  // The one buffer every tensor lives in, and the bytes it reserves (what the batch counts
  // against max_buffered_bytes until the trainer takes it).
  const std::byte* buffer() const { return buffer_; }
  std::size_t buffer_capacity() const { return capacity_; }
  // The engine's: hands the batch `buffer` (`capacity` bytes reserved), kept alive by `owner`.
  void set_buffer(std::shared_ptr<void> owner, std::byte* buffer, std::size_t capacity) {
    owner_ = std::move(owner);
    buffer_ = buffer;
    capacity_ = capacity;
  }

 private:
  std::shared_ptr<void> owner_;  // shared by the batch's copies: the buffer returns when the last goes
  std::byte* buffer_ = nullptr;
  std::size_t capacity_ = 0;
};

// What loaders over the same data share: the manifests as read and the tokenizer as loaded.
// Opening a Loader reads both (a 150k-token tokenizer takes about 0.25 s, a large remote manifest
// far more); a program that opens many loaders over the same data (one per part of a run, as
// mmfeed.ray's actors do, or one per evaluation pass) reads them once and opens each from these.
// The manifests are a snapshot: a loader opened from them sees the lines read here (and its resume
// fingerprint is theirs), whatever the files hold by then.
//
//   MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const LoaderInputs> inputs, LoaderInputs::read(config));
//   MMFEED_ASSIGN_OR_RETURN(auto loader, Loader::open(config, state, inputs));
class LoaderInputs {
 public:
  // Reads config.manifests (each under config.max_manifest_bytes) and loads config.tokenizer.
  static Result<std::shared_ptr<const LoaderInputs>> read(const LoaderConfig& config);
  // Whether these inputs are those of `config`: the same manifests (as named), tokenizer and
  // max_manifest_bytes; else an error naming the option that differs.
  Status check_serves(const LoaderConfig& config) const;

  struct Data;  // the engine's (src/pipeline/inputs.h)
  explicit LoaderInputs(std::unique_ptr<const Data> data);
  ~LoaderInputs();
  LoaderInputs(const LoaderInputs&) = delete;
  LoaderInputs& operator=(const LoaderInputs&) = delete;
  const Data& data() const { return *data_; }

 private:
  std::unique_ptr<const Data> data_;
};

class Loader {
 public:
  // Reads the manifests and the tokenizer (or takes them from `inputs`, which must be those of
  // `config`), checks the configuration (each error names the field), and starts the stages.
  // `resume` continues a previous run at its state.
  static Result<std::unique_ptr<Loader>> open(const LoaderConfig& config, std::optional<LoaderState> resume = {},
                                              std::shared_ptr<const LoaderInputs> inputs = nullptr);
  // The positions of each epoch's order (this rank's samples, padding included; cut at
  // end_position in the last epoch) for the run `config` resumed at `resume` would be, without
  // starting it: the manifests are read (or taken from `inputs`) and counted, the configuration
  // and state checked.
  static Result<std::vector<std::uint64_t>> epoch_sizes(const LoaderConfig& config,
                                                        std::optional<LoaderState> resume = {},
                                                        std::shared_ptr<const LoaderInputs> inputs = nullptr);
  virtual ~Loader();

  // The next batch in order; nullopt after the last epoch. An error when on_error = "fail"
  // meets a bad sample, or when the error budget is exceeded.
  virtual Result<std::optional<Batch>> next() = 0;
  // Like next(), but gives up after `timeout` with *timed_out set (the Python binding polls
  // for Ctrl-C between tries). The serial mode does its work and never times out. With
  // cuda_device, `consumer_stream` is the cudaStream_t that will read the batch (null: the legacy
  // default stream): its memory is reused only after the work queued there by the batch's release.
  virtual Result<std::optional<Batch>> next_for(std::chrono::milliseconds timeout, bool* timed_out,
                                                void* consumer_stream) = 0;
  // The position after the last delivered batch.
  virtual LoaderState state() const = 0;
  // Every sample skipped so far, with its stage and reason.
  virtual std::vector<SampleError> errors() const = 0;
  // Per-stage counters and timings, the consumer's wait time, as JSON.
  virtual std::string metrics_json() const = 0;
  // Stops the stages and writes the trace (trace_path). Unless the data had ended, next() returns
  // kCancelled afterwards, also a next() waiting on another thread: a consumer never takes a
  // close() for the end of the data. The error is the trace's, when it could not be written (a
  // full disk); every later call returns the same. Idempotent.
  virtual Status close() = 0;
};

}  // namespace mmfeed
