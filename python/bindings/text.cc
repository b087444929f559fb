// Binding of the tokenizer: the GIL is released while encoding.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <thread>

#include "text/tokenizer.h"

namespace nb = nanobind;
using namespace mmfeed;

namespace {

[[noreturn]] void raise_text(const Error& e) {
  if (e.code() == ErrorCode::kNotFound) throw nb::builtin_exception(nb::exception_type::runtime_error, e.to_string().c_str());
  throw nb::value_error(e.to_string().c_str());
}

}  // namespace

void bind_text(nb::module_& m) {
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
