// The Python binding: a thin layer over the public C++ API (include/mmfeed/). No engine
// logic lives here; heavy calls release the GIL at this boundary.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "mmfeed/build_info.h"
#include "mmfeed/storage.h"
#include "mmfeed/system.h"

namespace nb = nanobind;

void bind_vision(nb::module_& m);
void bind_audio(nb::module_& m);
void bind_text(nb::module_& m);
void bind_loader(nb::module_& m);
void bind_index(nb::module_& m);

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

  m.def("usable_cpus", &mmfeed::usable_cpus,
        "The CPUs this process may use, as workers=\"auto\" counts them: its CPU affinity, capped by "
        "the smallest cgroup v2 cpu.max quota from its cgroup up to the root (rounded up).");
  m.def("cgroup_cpu_limit", &mmfeed::cgroup_cpu_limit,
        "The smallest cgroup v2 cpu.max quota (quota / period, in cores) from this process's cgroup up "
        "to the root, or None where none is set.");

  using Pairs = std::vector<std::pair<std::string, std::string>>;
  m.def(
      "sign_v4",
      [](std::string method, std::string host, std::string path, Pairs query, Pairs headers, std::string payload_hash,
         std::string access_key, std::string secret_key, std::string session_token, std::string region,
         std::string service, std::string amz_date, bool content_sha256_header) {
        const mmfeed::SigV4Signature s = mmfeed::sign_request_v4({.method = std::move(method),
                                                                  .host = std::move(host),
                                                                  .path = std::move(path),
                                                                  .query = std::move(query),
                                                                  .headers = std::move(headers),
                                                                  .payload_hash = std::move(payload_hash),
                                                                  .add_content_sha256_header = content_sha256_header,
                                                                  .access_key = std::move(access_key),
                                                                  .secret_key = std::move(secret_key),
                                                                  .session_token = std::move(session_token),
                                                                  .region = std::move(region),
                                                                  .service = std::move(service),
                                                                  .amz_date = std::move(amz_date)});
        nb::dict out;
        out["canonical_request"] = s.canonical_request;
        out["string_to_sign"] = s.string_to_sign;
        out["signature"] = s.signature;
        out["authorization"] = s.authorization;
        out["headers"] = s.headers;
        return out;
      },
      nb::arg("method"), nb::arg("host"), nb::arg("path"), nb::kw_only(), nb::arg("query") = Pairs(),
      nb::arg("headers") = Pairs(), nb::arg("payload_hash") = "UNSIGNED-PAYLOAD", nb::arg("access_key"),
      nb::arg("secret_key"), nb::arg("session_token") = "", nb::arg("region") = "us-east-1", nb::arg("service") = "s3",
      nb::arg("amz_date"), nb::arg("content_sha256_header") = true,
      "AWS Signature Version 4 of one request, as mmfeed's S3 client signs it. `path` and the "
      "query pairs are raw (unencoded). Returns canonical_request, string_to_sign, signature, "
      "authorization and the headers to send.");

  bind_vision(m);
  bind_audio(m);
  bind_text(m);
  bind_loader(m);
  bind_index(m);
}
