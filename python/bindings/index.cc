// Binding of the dataset index's build (include/mmfeed/index.h): a whole build, and a manifest's
// index in parts (planned here, described on other machines, taken here: mmfeed.ray.build_index).
// Options come as a dict of IndexOptions' fields; a summary goes back as a dict, the keys of
// `mmfeed index --json`. The GIL is released while the engine works.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "mmfeed/index.h"
#include "python/bindings/errors.h"

namespace nb = nanobind;
using namespace mmfeed;

namespace {

// IndexOptions from {"out": ..., "media_root": ..., "probe_media": ..., "tokenizer": ...,
// "model": ..., "chat_template": ..., "cache_dir": ..., "checkpoint_samples": ...}.
IndexOptions index_options(const nb::dict& given) {
  IndexOptions o;
  for (auto [key, value] : given) {
    const std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "out") {
      o.out = nb::cast<std::string>(value);
    } else if (k == "media_root") {
      o.media_root = nb::cast<std::string>(value);
    } else if (k == "probe_media") {
      o.probe_media = nb::cast<bool>(value);
    } else if (k == "tokenizer") {
      o.tokenizer = nb::cast<std::string>(value);
    } else if (k == "model") {
      o.model = nb::cast<std::string>(value);
    } else if (k == "chat_template") {
      o.chat_template = nb::cast<std::string>(value);
    } else if (k == "cache_dir") {
      o.cache_dir = nb::cast<std::string>(value);
    } else if (k == "checkpoint_samples") {
      o.checkpoint_samples = nb::cast<std::uint64_t>(value);
    } else {
      throw nb::type_error(("not an index option: " + k).c_str());
    }
  }
  return o;
}

nb::dict summary_dict(const IndexSummary& s) {
  nb::dict out;
  out["index"] = s.path;
  out["samples"] = s.samples;
  out["images"] = s.images;
  out["videos"] = s.videos;
  out["audio"] = s.audio;
  out["text_bytes"] = s.text_bytes;
  out["text_tokens"] = s.text_tokens;
  out["index_bytes"] = s.index_bytes;
  out["bad_count"] = s.bad_count;
  out["media_unreadable"] = s.media_unreadable;
  out["media_not_probed"] = s.media_not_probed;
  out["resumed_samples"] = s.resumed_samples;
  out["shards_indexed"] = s.shards_indexed;
  out["shards_kept"] = s.shards_kept;
  out["shards_damaged"] = s.shards_damaged;
  out["bad"] = s.bad;
  out["unreadable"] = s.unreadable;
  return out;
}

// `call()`'s result, the GIL released while the engine works; its error raised.
template <class F>
auto released(F call) {
  auto r = [&] {
    nb::gil_scoped_release release;
    return call();
  }();
  return python::value_or_raise(std::move(r));
}

}  // namespace

void bind_index(nb::module_& m) {
  m.def(
      "build_index",
      [](const std::string& source, nb::dict options, const std::vector<nb::bytes>& parts) {
        IndexOptions o = index_options(options);
        for (const nb::bytes& p : parts) o.parts.emplace_back(p.c_str(), p.size());
        return summary_dict(released([&] { return build_index(source, o); }));
      },
      nb::arg("source"), nb::arg("options"), nb::arg("parts") = std::vector<nb::bytes>(),
      "Builds `source`'s dataset index (mmfeed index SOURCE); `parts`: its samples described apart by "
      "describe_index_part, in order. Returns what it found, as `mmfeed index --json` prints it.");
  m.def(
      "index_files",
      [](const std::string& source) {
        const IndexFiles f = released([&] { return index_files(source); });
        return nb::make_tuple(f.kind, f.files);
      },
      nb::arg("source"),
      "What build_index indexes `source` as: ('shards' or 'parquet', the files indexed one by one) or "
      "('manifest', [source]).");
  m.def(
      "plan_index_parts",
      [](const std::string& source, std::uint64_t parts) {
        nb::list out;
        for (const IndexPartRange& p : released([&] { return plan_index_parts(source, parts); })) {
          out.append(nb::make_tuple(p.begin, p.end));
        }
        return out;
      },
      nb::arg("source"), nb::arg("parts"),
      "About `parts` byte ranges (begin, end) of the manifest's text that describe_index_part describes apart.");
  m.def(
      "describe_index_part",
      [](const std::string& source, std::uint64_t begin, std::uint64_t end, nb::dict options) {
        const IndexOptions o = index_options(options);
        const std::string bytes = released([&] { return describe_index_part(source, {begin, end}, o); });
        return nb::bytes(bytes.data(), bytes.size());
      },
      nb::arg("source"), nb::arg("begin"), nb::arg("end"), nb::arg("options"),
      "The samples whose lines start in bytes [begin, end) of the manifest's text, described for build_index.");
}
