// Binding of the Loader: batches come out as numpy arrays, or torch tensors through DLPack, that
// share the C++ batch buffer (the capsule holds the buffer; dropping the last array returns it
// to the pool). The GIL is released while the engine works and while next() waits. With
// cuda_device, the engine puts each batch on that CUDA device first and the arrays are device
// arrays (DLPack kDLCUDA), read on the stream next() is given.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <string>
#include <type_traits>

#include "mmfeed/balance.h"
#include "mmfeed/config_file.h"
#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"
#include "mmfeed/system.h"
#include "python/bindings/errors.h"

namespace nb = nanobind;
using namespace mmfeed;

namespace {

// What an option of type T takes, for the message when a value does not convert.
template <class T>
std::string expected() {
  if constexpr (std::is_enum_v<T>)
    return "one of " + choice_list<T>();
  else if constexpr (std::is_same_v<T, bool>)
    return "True or False";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_unsigned_v<T>)
    return "an integer >= 0";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return "a list of numbers";
  else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>)
    return "a list of integers";
  else
    return "a string or a list of strings";
}

// Sets `out` from a Python value: a fixed choice from its name, the rest by nanobind's casts.
template <class T>
void set_from(T& out, const char* key, nb::handle value) {
  try {
    if constexpr (std::is_enum_v<T>) {
      const std::optional<T> v = parse_choice<T>(nb::cast<std::string>(value));
      if (!v) throw nb::cast_error();
      out = *v;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out =
          nb::isinstance<nb::str>(value) ? T{nb::cast<std::string>(value)} : nb::cast<T>(value);  // one item, or a list
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      out = takes_auto(key) && nb::isinstance<nb::str>(value) && nb::cast<std::string>(value) == "auto"
                ? T{0}
                : nb::cast<T>(value);
    } else {
      out = nb::cast<T>(value);
    }
  } catch (const nb::cast_error&) {
    const std::string got = nb::repr(value).c_str();
    throw nb::type_error(
        ("loader option '" + std::string(key) + "' must be " + expected<T>() + ", not " + got).c_str());
  }
}

// The config from keyword options, through the option table (mmfeed/loader_options.h); None
// leaves an option at its default.
LoaderConfig config_from(nb::dict d) {
  LoaderConfig c;
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    bool known = false;
    for_each_loader_option([&](const char* name, auto member, const char*) {
      if (k != name) return;
      known = true;
      if (!value.is_none()) set_from(c.*member, name, value);
    });
    if (!known) throw nb::value_error(("unknown loader option '" + k + "'").c_str());
  }
  return c;
}

// What an array's capsule holds: the batch, and the process that may release it.
struct BatchRef {
  std::shared_ptr<Batch> batch;
  pid_t pid;
};

// The resume state in `json` (none: start afresh); a malformed one raises.
std::optional<LoaderState> resume_from(const std::optional<std::string>& json) {
  if (!json) return std::nullopt;
  auto s = LoaderState::from_json(*json);
  if (!s.ok()) python::raise_error(s.error());
  return *s;
}

// The manifests and tokenizer of some options, read once for many loaders (LoaderInputs).
struct PyInputs {
  explicit PyInputs(nb::dict options) {
    const LoaderConfig c = config_from(options);
    Result<std::shared_ptr<const LoaderInputs>> r = Error(ErrorCode::kInternal, "unset");
    {
      nb::gil_scoped_release release;
      r = LoaderInputs::read(c);
    }
    if (!r.ok()) python::raise_error(r.error());
    inputs = std::move(r).value();
  }
  std::shared_ptr<const LoaderInputs> inputs;
};

std::shared_ptr<const LoaderInputs> inputs_of(const PyInputs* inputs) {
  return inputs != nullptr ? inputs->inputs : nullptr;
}

class PyLoader {
 public:
  PyLoader(nb::dict config, std::optional<std::string> state, const PyInputs* inputs) {
    const std::optional<LoaderState> resume = resume_from(state);
    const LoaderConfig c = config_from(config);
    Result<std::unique_ptr<Loader>> l = Error(ErrorCode::kInternal, "unset");
    {
      nb::gil_scoped_release release;
      l = Loader::open(c, resume, inputs_of(inputs));
    }
    if (!l.ok()) python::raise_error(l.error());
    loader_ = std::move(l).value();
  }

  // In a forked child (whose garbage collector may free a Loader inherited from the parent) the
  // engine's threads do not exist, and its mutexes may be held by threads that were copied
  // mid-call: destroying it there would crash or hang. It is left as it is, for the child's
  // exit to reclaim. (The Python Loader refuses to be used in a child.)
  ~PyLoader() {
    if (getpid() != pid_) {
      static_cast<void>(loader_.release());
      return;
    }
    nb::gil_scoped_release release;  // closing joins the engine's threads
    loader_.reset();
  }
  PyLoader(const PyLoader&) = delete;
  PyLoader& operator=(const PyLoader&) = delete;

  // An array of `Framework` (none: a DLPack-capable array) over tensor `t`'s memory at `data`,
  // kept alive by `owner`. `device`: -1 for host memory, else the CUDA device `data` is on.
  template <class... Framework>
  static nb::object view(const Tensor& t, void* data, const std::vector<std::size_t>& shape, nb::capsule owner,
                         int device) {
    const int type = device < 0 ? nb::device::cpu::value : nb::device::cuda::value;
    const int id = std::max(device, 0);
    // numpy has no bfloat16: it gets the 16-bit words (as mmfeed.ImageProcessor returns them);
    // torch and DLPack consumers get bfloat16.
    constexpr bool kNumpy = (std::is_same_v<Framework, nb::numpy> || ...);
    nb::dlpack::dtype dtype = nb::dtype<std::int64_t>();
    switch (t.dtype) {
      case Tensor::DType::kInt64: break;
      case Tensor::DType::kFloat32: dtype = nb::dtype<float>(); break;
      case Tensor::DType::kBFloat16:
        dtype = kNumpy ? nb::dtype<std::uint16_t>()
                       : nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
        break;
      case Tensor::DType::kUInt8: dtype = nb::dtype<std::uint8_t>(); break;
      case Tensor::DType::kInt32: dtype = nb::dtype<std::int32_t>(); break;
    }
    return nb::cast(nb::ndarray<Framework...>(data, shape.size(), shape.data(), owner, nullptr, dtype, type, id));
  }

  // `stream`: with cuda_device, the cudaStream_t (as an integer) that will read the batch.
  nb::object next(bool torch, std::uintptr_t stream) {
    Result<std::optional<Batch>> r = Error(ErrorCode::kInternal, "unset");
    while (true) {
      bool timed_out = false;
      {
        nb::gil_scoped_release release;
        r = loader_->next_for(std::chrono::milliseconds(100), &timed_out, reinterpret_cast<void*>(stream));
      }
      if (!timed_out) break;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();  // Ctrl-C while waiting
    }
    if (!r.ok()) python::raise_error(r.error());
    if (!r->has_value()) return nb::none();
    auto batch = std::make_shared<Batch>(std::move(**r));
    nb::dict out;
    for (const Tensor& t : batch->tensors) {
      // Each array's capsule keeps the whole batch (and so its buffer) alive. An array freed in
      // a forked child leaves the buffer alone: returning it would take the pool's mutex, which
      // a parent's thread may have held at the fork.
      auto* keep = new BatchRef{batch, pid_};
      nb::capsule owner(keep, [](void* p) noexcept {
        auto* ref = static_cast<BatchRef*>(p);
        if (getpid() == ref->pid) delete ref;
      });
      std::vector<std::size_t> shape(t.shape.begin(), t.shape.end());
      void* data = const_cast<void*>(batch->data(t));
      // numpy arrays, or torch tensors made from a DLPack capsule over the same memory; device
      // batches: torch tensors, or DLPack-capable arrays (numpy cannot hold device memory).
      if (torch) {
        out[t.name.c_str()] = view<nb::pytorch>(t, data, shape, owner, batch->device);
      } else if (batch->device >= 0) {
        out[t.name.c_str()] = view<>(t, data, shape, owner, batch->device);
      } else {
        out[t.name.c_str()] = view<nb::numpy>(t, data, shape, owner, batch->device);
      }
    }
    for (const auto& [name, value] : batch->scalars) out[name.c_str()] = value;
    out["sample_ids"] = batch->sample_ids;
    out["epoch"] = batch->epoch;
    out["index"] = batch->index;
    out["buffer_address"] = reinterpret_cast<std::uintptr_t>(batch->buffer());
    return out;
  }

  // With cuda_device, batches staged ahead are not delivered yet.
  std::string state() const { return loader_->state().to_json(); }
  nb::list errors() const {
    nb::list out;
    for (const SampleError& e : loader_->errors()) {
      nb::dict d;
      d["sample_id"] = e.sample_id;
      d["stage"] = e.stage;
      d["reason"] = e.reason;
      d["code"] = std::string(error_code_name(e.code));
      out.append(d);
    }
    return out;
  }
  std::string metrics() const { return loader_->metrics_json(); }
  // Raises OSError when the trace (trace_path) could not be written.
  void close() {
    Status closed;
    {
      nb::gil_scoped_release release;
      closed = loader_->close();
    }
    if (!closed.ok()) {
      PyErr_SetString(PyExc_OSError, closed.error().to_string().c_str());
      throw nb::python_error();
    }
  }

 private:
  std::unique_ptr<Loader> loader_;
  const pid_t pid_ = getpid();
};

// mmfeed.balance_report: the report as a dict (steps as (drawn_max, drawn_mean, planned_max, planned_mean)).
nb::dict balance_report_dict(nb::dict options) {
  const LoaderConfig c = config_from(options);
  Result<BalanceReport> r = Error(ErrorCode::kInternal, "unset");
  {
    nb::gil_scoped_release release;
    r = balance_report(c);
  }
  if (!r.ok()) python::raise_error(r.error());
  nb::list steps;
  for (const BalanceStep& s : r->steps)
    steps.append(nb::make_tuple(s.drawn_max, s.drawn_mean, s.planned_max, s.planned_mean));
  nb::dict out;
  out["steps"] = steps;
  out["samples"] = r->samples;
  out["media"] = r->media;
  out["media_nominal"] = r->media_nominal;
  out["mean_drawn"] = r->mean_drawn();
  out["mean_planned"] = r->mean_planned();
  out["mean_free"] = r->mean_free();
  out["cost_seconds"] = r->cost_seconds;
  out["plan_seconds"] = r->plan_seconds;
  return out;
}

}  // namespace

void bind_loader(nb::module_& m) {
  m.def(
      "_check_loader_options", [](nb::dict options) { static_cast<void>(config_from(options)); },
      "Raises what opening a loader with these options would raise for an unknown name or a wrong type.");
  m.def(
      "loader_options",
      [] {
        nb::list out;
        for (const LoaderOptionInfo& o : loader_options()) {
          nb::dict d;
          d["name"] = o.name;
          d["type"] = o.type;
          d["default"] = o.default_text;
          d["doc"] = o.doc;
          out.append(d);
        }
        return out;
      },
      "The engine's loader options, from its one option table: [{name, type, default, doc}, ...].");
  m.def(
      "read_config",
      [](const std::string& path) {
        LoaderConfig c;
        python::raise_if_error(read_loader_config(c, path));
        return changed_options_json(c);
      },
      nb::arg("path"),
      "The loader options a config file sets (a JSON object, or a TOML table in *.toml), as the CLI's --config "
      "reads it: a JSON object of option names and values.");
  m.def(
      "reshard_states",
      [](const std::vector<std::string>& states, int rank, int world_size) {
        std::vector<LoaderState> old;
        for (const std::string& json : states) {
          auto s = LoaderState::from_json(json);
          if (!s.ok()) python::raise_error(s.error());
          old.push_back(*s);
        }
        auto r = LoaderState::reshard(old, rank, world_size);
        if (!r.ok()) python::raise_error(r.error());
        return r->to_json();
      },
      nb::arg("states"), nb::arg("rank"), nb::arg("world_size"));
  m.def(
      "epoch_sizes",
      [](nb::dict options, std::optional<std::string> state, const PyInputs* inputs) {
        const std::optional<LoaderState> resume = resume_from(state);
        const LoaderConfig c = config_from(options);
        Result<std::vector<std::uint64_t>> sizes = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          sizes = Loader::epoch_sizes(c, resume, inputs_of(inputs));
        }
        if (!sizes.ok()) python::raise_error(sizes.error());
        return *sizes;
      },
      nb::arg("options"), nb::arg("state").none() = nb::none(), nb::arg("inputs").none() = nb::none(),
      "The positions of each epoch's order for a run of these options (resumed at `state`), without starting it.");
  m.def("balance_report", &balance_report_dict, nb::arg("options"),
        "Each step's largest rank cost over the mean, as drawn and as balance= splits it (mmfeed/balance.h).");
  m.def(
      "cost_model",
      [](nb::dict options) {
        const std::array<double, 4> c = planned_cost(config_from(options));
        return std::vector<double>(c.begin(), c.end());
      },
      nb::arg("options"),
      "The four coefficients balance= plans with for these options (balance_cost's order): balance_cost's, else "
      "the default model's FLOPs; balance=\"tokens\": one a token.");
  m.def(
      "open_step",
      [](nb::dict options, const std::string& state) {
        auto s = LoaderState::from_json(state);
        if (!s.ok()) python::raise_error(s.error());
        return s->open_step(config_from(options));
      },
      nb::arg("options"), nb::arg("state"),
      "(epoch, step): the first balanced step of the state's epoch none of whose samples it consumed "
      "(LoaderState::open_step).");
  m.def(
      "group_positions", [](nb::dict options) { return group_positions(config_from(options)); }, nb::arg("options"),
      "The positions of one batch's group for these options: batch_size, or pack_window when packing.");
  m.def(
      "cuda_runtime", [] { return cuda_runtime_description(); },
      "Whether batch memory can be pinned: the CUDA runtime found at run time, or why none was.");
  nb::class_<PyInputs>(m, "_LoaderInputs")
      .def(nb::init<nb::dict>(), nb::arg("options"),
           "Reads the manifests and loads the tokenizer of these loader options (LoaderInputs::read).");
  nb::class_<PyLoader>(m, "_Loader")
      .def(nb::init<nb::dict, std::optional<std::string>, const PyInputs*>(), nb::arg("config"),
           nb::arg("state").none(), nb::arg("inputs").none() = nb::none())
      .def("next", &PyLoader::next, nb::arg("torch") = false, nb::arg("stream") = 0)
      .def("state", &PyLoader::state)
      .def("errors", &PyLoader::errors)
      .def("metrics", &PyLoader::metrics)
      .def("close", &PyLoader::close);
}
