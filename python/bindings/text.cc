// Binding of the text API (mmfeed/text.h): the GIL is released while encoding.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "mmfeed/loader_options.h"
#include "mmfeed/text.h"
#include "python/bindings/errors.h"

namespace nb = nanobind;
using namespace mmfeed;
using python::value_or_raise;

namespace {

std::vector<GridThw> grids_of(const std::vector<std::vector<std::int64_t>>& in) {
  std::vector<GridThw> out;
  for (const auto& g : in) {
    if (g.size() != 3) throw nb::value_error("grids are (t, h, w) triples");
    out.push_back({g[0], g[1], g[2]});
  }
  return out;
}

template <class E>
E choice_of(const std::string& name, const char* option) {
  const std::optional<E> v = parse_choice<E>(name);
  if (!v)
    throw nb::value_error((std::string(option) + " must be " + choice_list<E>() + ", not '" + name + "'").c_str());
  return *v;
}

}  // namespace

void bind_text(nb::module_& m) {
  m.def(
      "render_chat",
      [](const std::string& sample_json, const std::string& tmpl, bool add_generation_prompt, bool add_vision_id,
         std::optional<bool> enable_thinking, bool add_audio_id) {
        return value_or_raise(render_chat(sample_json, {.chat_template = tmpl,
                                                        .add_generation_prompt = add_generation_prompt,
                                                        .add_vision_id = add_vision_id,
                                                        .enable_thinking = enable_thinking,
                                                        .add_audio_id = add_audio_id}));
      },
      nb::arg("sample_json"), nb::arg("template"), nb::arg("add_generation_prompt"), nb::arg("add_vision_id"),
      nb::arg("enable_thinking").none() = nb::none(), nb::arg("add_audio_id") = false);
  m.def(
      "encode_conversation",
      [](const Tokenizer& tok, const std::string& sample_json, std::vector<std::vector<std::int64_t>> image_grids,
         std::vector<std::vector<std::int64_t>> video_grids, std::vector<double> second_per_grid_ts,
         std::vector<std::vector<double>> video_timestamps, std::vector<std::int64_t> audio_tokens,
         std::vector<std::int64_t> video_audio_tokens, int tokens_per_second, const std::string& tmpl,
         std::size_t max_length, const std::string& truncation, const std::string& labels, bool mrope,
         bool add_vision_id, int merge_size, bool train_reasoning) {
        EncodeOptions o;
        o.chat_template = tmpl;
        o.add_vision_id = add_vision_id;
        o.image_grids = grids_of(image_grids);
        o.video_grids = grids_of(video_grids);
        o.second_per_grid_ts = std::move(second_per_grid_ts);
        o.video_timestamps = std::move(video_timestamps);
        o.audio_tokens = std::move(audio_tokens);
        o.video_audio_tokens = std::move(video_audio_tokens);
        o.tokens_per_second = tokens_per_second;
        o.merge_size = merge_size;
        o.max_length = max_length;
        o.truncation = choice_of<Truncation>(truncation, "truncation");
        o.labels = choice_of<Labels>(labels, "labels");
        o.mrope = mrope;
        o.train_reasoning = train_reasoning;
        Result<EncodedSample> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = encode_conversation(tok, sample_json, o);
        }
        EncodedSample s = value_or_raise(std::move(r));
        nb::dict d;
        d["input_ids"] = s.input_ids;
        d["labels"] = s.labels;
        d["attention_mask"] = s.attention_mask;
        if (mrope) d["position_ids"] = s.position_ids;
        d["images_kept"] = s.images_kept;
        d["videos_kept"] = s.videos_kept;
        d["audios_kept"] = s.audios_kept;
        return d;
      },
      nb::arg("tokenizer"), nb::arg("sample_json"), nb::arg("image_grids"), nb::arg("video_grids"),
      nb::arg("second_per_grid_ts"), nb::arg("video_timestamps"), nb::arg("audio_tokens"),
      nb::arg("video_audio_tokens"), nb::arg("tokens_per_second"), nb::arg("template"), nb::arg("max_length"),
      nb::arg("truncation"), nb::arg("labels"), nb::arg("mrope"), nb::arg("add_vision_id"), nb::arg("merge_size"),
      nb::arg("train_reasoning"));
  nb::class_<Tokenizer>(m, "_Tokenizer")
      .def_static(
          "from_file", [](const std::string& path) { return value_or_raise(Tokenizer::from_file(path)); },
          nb::arg("path"))
      .def_static(
          "from_str", [](const std::string& json) { return value_or_raise(Tokenizer::from_json(json)); },
          nb::arg("json"))
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& s) {
            Result<std::vector<std::int32_t>> r = Error(ErrorCode::kInternal, "unset");
            {
              nb::gil_scoped_release release;
              r = t.encode(s);
            }
            return value_or_raise(std::move(r));
          },
          nb::arg("text"))
      .def(
          "encode_bytes",
          [](const Tokenizer& t, nb::bytes b) {
            return value_or_raise(t.encode(std::string_view(b.c_str(), b.size())));
          },
          nb::arg("data"))
      .def(
          "encode_batch",
          [](const Tokenizer& t, const std::vector<std::string>& texts, int threads) {
            Result<std::vector<std::vector<std::int32_t>>> r = Error(ErrorCode::kInternal, "unset");
            {
              nb::gil_scoped_release release;
              r = t.encode_batch(texts, threads);
            }
            return value_or_raise(std::move(r));
          },
          nb::arg("texts"), nb::arg("threads") = 1)
      .def("decode", &Tokenizer::decode, nb::arg("ids"), nb::arg("skip_special_tokens") = false)
      .def("token_to_id", [](const Tokenizer& t, const std::string& s) { return t.token_to_id(s); })
      .def("vocab_size", &Tokenizer::vocab_size);
}
