// Binding of the tokenizer: the GIL is released while encoding.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <thread>

#include "text/chat_encode.h"
#include "text/tokenizer.h"

namespace nb = nanobind;
using namespace mmfeed;

namespace {

[[noreturn]] void raise_text(const Error& e) {
  if (e.code() == ErrorCode::kNotFound)
    throw nb::builtin_exception(nb::exception_type::runtime_error, e.to_string().c_str());
  throw nb::value_error(e.to_string().c_str());
}

}  // namespace

namespace {

text::Conversation conversation_from_json(const std::string& json) {
  auto c = text::parse_conversation(json);
  if (!c.ok()) raise_text(c.error());
  return std::move(c).value();
}

text::ChatTemplate template_of(const std::string& name) {
  auto t = text::chat_template(name);
  if (!t.ok()) raise_text(t.error());
  return *t;
}

}  // namespace

void bind_text(nb::module_& m) {
  m.def(
      "render_chat",
      [](const std::string& sample_json, const std::string& tmpl, bool add_generation_prompt, bool add_vision_id) {
        const text::Conversation c = conversation_from_json(sample_json);
        auto r = text::render_chat(c, template_of(tmpl), {add_generation_prompt, add_vision_id});
        if (!r.ok()) raise_text(r.error());
        return r->text;
      },
      nb::arg("sample_json"), nb::arg("template"), nb::arg("add_generation_prompt"), nb::arg("add_vision_id"));
  m.def(
      "encode_conversation",
      [](const text::Tokenizer& tok, const std::string& sample_json, std::vector<std::vector<std::int64_t>> image_grids,
         std::vector<std::vector<std::int64_t>> video_grids, std::vector<double> second_per_grid_ts,
         std::vector<std::vector<double>> video_timestamps, int tokens_per_second, const std::string& tmpl,
         std::size_t max_length, const std::string& truncation, const std::string& labels, bool mrope,
         bool add_vision_id, int merge_size, bool train_reasoning) {
        const text::Conversation c = conversation_from_json(sample_json);
        auto grids = [](const std::vector<std::vector<std::int64_t>>& in) {
          std::vector<text::Grid3> out;
          for (const auto& g : in) {
            if (g.size() != 3) throw nb::value_error("grids are (t, h, w) triples");
            out.push_back({g[0], g[1], g[2]});
          }
          return out;
        };
        text::SftOptions o;
        o.max_length = max_length;
        if (truncation == "error") {
          o.truncation = text::Truncation::kError;
        } else if (truncation == "truncate") {
          o.truncation = text::Truncation::kTruncate;
        } else {
          throw nb::value_error("truncation must be 'error' or 'truncate'");
        }
        if (labels == "qwen") {
          o.labels = text::LabelPolicy::kQwen;
        } else if (labels == "content_and_eos") {
          o.labels = text::LabelPolicy::kContentAndEos;
        } else {
          throw nb::value_error("labels must be 'qwen' or 'content_and_eos'");
        }
        o.mrope_position_ids = mrope;
        o.merge_size = merge_size;
        o.render.add_vision_id = add_vision_id;
        o.train_reasoning = train_reasoning;
        const auto ig = grids(image_grids);
        std::vector<text::VideoGrid> vg;
        for (const text::Grid3& g : grids(video_grids)) vg.push_back({g, 0, {}});
        if (!second_per_grid_ts.empty() && second_per_grid_ts.size() != vg.size()) {
          throw nb::value_error("second_per_grid_ts needs one value per video");
        }
        if (!video_timestamps.empty() && video_timestamps.size() != vg.size()) {
          throw nb::value_error("video_timestamps needs one list per video");
        }
        for (std::size_t k = 0; k < vg.size(); ++k) {
          if (!second_per_grid_ts.empty()) vg[k].second_per_grid_t = second_per_grid_ts[k];
          if (!video_timestamps.empty()) vg[k].timestamps = video_timestamps[k];
        }
        o.tokens_per_second = tokens_per_second;
        const text::ChatTemplate tmpl_value = template_of(tmpl);
        Result<text::SftSample> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = text::encode_conversation(tok, c, tmpl_value, ig, vg, o);
        }
        if (!r.ok()) raise_text(r.error());
        nb::dict d;
        d["input_ids"] = r->input_ids;
        d["labels"] = r->labels;
        d["attention_mask"] = r->attention_mask;
        if (mrope) d["position_ids"] = r->position_ids;
        d["images_kept"] = r->images_kept;
        d["videos_kept"] = r->videos_kept;
        return d;
      },
      nb::arg("tokenizer"), nb::arg("sample_json"), nb::arg("image_grids"), nb::arg("video_grids"),
      nb::arg("second_per_grid_ts"), nb::arg("video_timestamps"), nb::arg("tokens_per_second"), nb::arg("template"),
      nb::arg("max_length"), nb::arg("truncation"), nb::arg("labels"), nb::arg("mrope"), nb::arg("add_vision_id"),
      nb::arg("merge_size"), nb::arg("train_reasoning"));
  nb::class_<text::Tokenizer>(m, "_Tokenizer")
      .def_static(
          "from_file",
          [](const std::string& path) {
            auto t = text::Tokenizer::from_file(path);
            if (!t.ok()) raise_text(t.error());
            return std::move(t).value();
          },
          nb::arg("path"))
      .def_static(
          "from_str",
          [](const std::string& json) {
            auto t = text::Tokenizer::from_json(json);
            if (!t.ok()) raise_text(t.error());
            return std::move(t).value();
          },
          nb::arg("json"))
      .def(
          "encode",
          [](const text::Tokenizer& t, const std::string& s) {
            Result<std::vector<std::int32_t>> r = Error(ErrorCode::kInternal, "unset");
            {
              nb::gil_scoped_release release;
              r = t.encode(s);
            }
            if (!r.ok()) raise_text(r.error());
            return std::move(r).value();
          },
          nb::arg("text"))
      .def(
          "encode_bytes",
          [](const text::Tokenizer& t, nb::bytes b) {
            auto r = t.encode(std::string_view(b.c_str(), b.size()));
            if (!r.ok()) raise_text(r.error());
            return std::move(r).value();
          },
          nb::arg("data"))
      .def(
          "encode_batch",
          [](const text::Tokenizer& t, const std::vector<std::string>& texts, int threads) {
            std::vector<Result<std::vector<std::int32_t>>> out(texts.size(), Error(ErrorCode::kInternal, "unset"));
            {
              nb::gil_scoped_release release;
              std::atomic<std::size_t> next{0};
              auto work = [&] {
                for (std::size_t i = next++; i < texts.size(); i = next++) out[i] = t.encode(texts[i]);
              };
              std::vector<std::thread> pool;
              for (int w = 1; w < threads; ++w) pool.emplace_back(work);
              work();
              for (auto& th : pool) th.join();
            }
            std::vector<std::vector<std::int32_t>> ids;
            ids.reserve(out.size());
            for (std::size_t i = 0; i < out.size(); ++i) {
              if (!out[i].ok()) raise_text(std::move(out[i]).error().with_context("text " + std::to_string(i)));
              ids.push_back(std::move(out[i]).value());
            }
            return ids;
          },
          nb::arg("texts"), nb::arg("threads") = 1)
      .def("decode", &text::Tokenizer::decode, nb::arg("ids"), nb::arg("skip_special_tokens") = false)
      .def("token_to_id", [](const text::Tokenizer& t, const std::string& s) { return t.token_to_id(s); })
      .def("vocab_size", &text::Tokenizer::vocab_size);
}
