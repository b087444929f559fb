// The Python binding: a thin layer over the public C++ API (include/mmfeed/). No engine
// logic lives here; heavy calls release the GIL at this boundary.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "mmfeed/build_info.h"

namespace nb = nanobind;

NB_MODULE(_mmfeed, m) {
  m.doc() = "mmfeed native engine";
  m.attr("__version__") = std::string(mmfeed::version());

  m.def(
      "linked_libraries",
      [] {
        nb::list out;
        for (const auto& lib : mmfeed::linked_libraries()) {
          nb::dict d;
          d["name"] = lib.name;
          d["version"] = lib.version;
          d["detail"] = lib.detail;
          out.append(d);
        }
        return out;
      },
      "The native libraries the engine is linked with, as a list of dicts with keys name, "
      "version and detail.");
}
