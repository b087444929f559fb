#include "dataset/source_files.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "dataset/brace_pattern.h"
#include "dataset/shards.h"
#include "storage/listing.h"
#include "storage/redact.h"
#include "storage/uri.h"

namespace mmfeed::dataset {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxStateJsonBytes = std::size_t{16} << 20;

// Files a dataset folder holds beside its data: Hugging Face's metadata and cards.
bool is_metadata(std::string_view name) {
  for (std::string_view m : {"dataset_info.json", "dataset_infos.json", "state.json", "dataset_dict.json"}) {
    if (name == m) return true;
  }
  return false;
}

// A data file's name: a layout mmfeed reads, by its extension (JSONL and JSON also compressed).
bool is_data_file(std::string_view name) {
  if (is_metadata(name)) return false;
  for (std::string_view ext :
       {".parquet", ".tar", ".arrow", ".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst"}) {
    if (name.ends_with(ext)) return true;
  }
  return false;
}

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::kManifest: return "JSONL/JSON";
    case Layout::kShards: return "tar shards";
    case Layout::kParquet: return "Parquet";
    case Layout::kArrow: return "Arrow";
    case Layout::kEnergon: return "Energon";
  }
  return "?";
}

std::string file_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The files' one layout; files of several are refused, naming an example of each.
Result<Layout> one_layout(const std::vector<std::string>& files, const std::string& source) {
  std::map<Layout, std::string> seen;
  for (const std::string& f : files) seen.emplace(layout_of(f), f);
  if (seen.size() == 1) return seen.begin()->first;
  std::string kinds;
  for (const auto& [layout, example] : seen) {
    kinds += (kinds.empty() ? "" : ", ") + std::string(layout_name(layout)) + " (" + storage::redact_uri(example) + ")";
  }
  return Error(ErrorCode::kInvalidArgument,
               "names files of several layouts: " + kinds + "; name one layout's files (a glob: *.parquet)", source);
}

// Hugging Face's split files ("train-00000-of-00004.parquet"): a folder holding several splits'
// would mix them.
Status one_split(const std::vector<std::string>& files, const std::string& source) {
  std::set<std::string> splits;
  for (const std::string& f : files) {
    const std::string name = file_name(f);
    const std::size_t of = name.find("-of-");
    const std::size_t dash = of == std::string::npos || of < 6 ? std::string::npos : name.rfind('-', of - 1);
    if (dash != std::string::npos && dash > 0 && of - dash == 6) splits.insert(name.substr(0, dash));
  }
  if (splits.size() <= 1) return ok_status();
  std::string names;
  for (const std::string& s : splits) names += (names.empty() ? "" : ", ") + s;
  return Error(
      ErrorCode::kInvalidArgument,
      "holds the files of several splits (" + names + "): name one split's (a glob: " + *splits.begin() + "-*)",
      source);
}

Result<std::vector<std::string>> checked_count(std::vector<std::string> files, const std::string& source) {
  if (files.size() > kMaxShardsPerSource) {
    return Error(ErrorCode::kResourceExhausted,
                 "names " + std::to_string(files.size()) + " files, more than a source may (" +
                     std::to_string(kMaxShardsPerSource) + ")",
                 source);
  }
  return files;
}

// The local files `pattern` (an absolute or relative path, wildcards in any component) matches.
Result<std::vector<std::string>> glob_local(const std::string& pattern) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= pattern.size();) {
    const std::size_t slash = std::min(pattern.find('/', at), pattern.size());
    parts.push_back(pattern.substr(at, slash - at));
    at = slash + 1;
  }
  std::vector<std::string> found = {pattern.starts_with('/') ? "/" : ""};
  for (std::size_t i = pattern.starts_with('/') ? 1 : 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    std::vector<std::string> next;
    for (const std::string& base : found) {
      const std::string prefix = base.empty() || base.ends_with('/') ? base : base + "/";
      if (!has_wildcard(part)) {
        std::error_code ec;
        if (fs::exists(prefix + part, ec)) next.push_back(prefix + part);
        continue;
      }
      std::error_code ec;
      for (fs::directory_iterator it(prefix.empty() ? "." : prefix, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with('.') && !part.starts_with('.')) continue;  // as a shell's glob
        if (!glob_match(part, name)) continue;
        std::error_code kind;
        if (last ? it->is_regular_file(kind) : it->is_directory(kind)) next.push_back(prefix + name);
      }
      if (next.size() > kMaxShardsPerSource) break;
    }
    found = std::move(next);
  }
  std::sort(found.begin(), found.end());
  return found;
}

Result<std::vector<std::string>> glob_s3(const storage::ObjectUri& uri, const storage::S3Options& s3) {
  const std::size_t wild = uri.key.find_first_of("*?");
  storage::ListOptions options;
  options.max_objects = kMaxShardsPerSource;
  MMFEED_ASSIGN_OR_RETURN(auto objects, storage::list_objects(s3, uri.bucket, uri.key.substr(0, wild), options));
  std::vector<std::string> out;
  for (const storage::S3Object& o : objects) {
    if (glob_match(uri.key, o.key)) out.push_back("s3://" + uri.bucket + "/" + o.key);
  }
  return out;
}

// A folder's data files, recursively, in path order: hidden entries (".cache", ".nv-meta") and
// files of no layout (README.md, .gitattributes, metadata) left out.
std::vector<std::string> data_files_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with('.')) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    std::error_code kind;
    if (it->is_regular_file(kind) && is_data_file(name)) out.push_back(it->path().string());
    if (out.size() > kMaxShardsPerSource) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `datasets.save_to_disk`'s folder: its state.json's "_data_files", in order.
Result<std::vector<std::string>> saved_dataset_files(const std::string& dir, const std::string& source) {
  const std::string state = dir + "/state.json";
  simdjson::dom::parser parser(kMaxStateJsonBytes);
  simdjson::dom::element doc;
  if (auto err = parser.load(state).get(doc); err) {
    return Error(ErrorCode::kCorruptData, std::string("its state.json: ") + simdjson::error_message(err), source);
  }
  simdjson::dom::array files;
  if (doc["_data_files"].get_array().get(files)) {
    return Error(ErrorCode::kCorruptData, "its state.json has no \"_data_files\" list", source);
  }
  std::vector<std::string> out;
  for (simdjson::dom::element f : files) {
    std::string_view name;
    if (f["filename"].get_string().get(name) || name.empty() || name.find('/') != std::string_view::npos ||
        name.starts_with('.')) {
      return Error(ErrorCode::kCorruptData, "its state.json lists a data file without a plain \"filename\"", source);
    }
    out.push_back(dir + "/" + std::string(name));
  }
  if (out.empty()) return Error(ErrorCode::kInvalidArgument, "its state.json lists no data file", source);
  return out;
}

Result<SourceFiles> local_folder(const std::string& dir, const std::string& source) {
  std::error_code ec;
  if (fs::exists(dir + "/state.json", ec)) {
    MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> files, saved_dataset_files(dir, source));
    return SourceFiles{Layout::kArrow, std::move(files)};
  }
  if (fs::exists(dir + "/dataset_dict.json", ec)) {
    std::string splits;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory()) splits += (splits.empty() ? "" : ", ") + it->path().filename().string();
    }
    return Error(ErrorCode::kInvalidArgument,
                 "is a DatasetDict saved by save_to_disk: name one split's folder (" + splits + ")", source);
  }
  std::vector<std::string> files = data_files_under(dir);
  if (files.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "is a folder of no layout mmfeed reads: no .parquet, .tar, .arrow (with state.json), .jsonl or "
                 ".json files, and no .nv-meta/split.yaml",
                 source);
  }
  MMFEED_RETURN_IF_ERROR(one_split(files, source));
  MMFEED_ASSIGN_OR_RETURN(files, checked_count(std::move(files), source));
  MMFEED_ASSIGN_OR_RETURN(Layout layout, one_layout(files, source));
  return SourceFiles{layout, std::move(files)};
}

Result<SourceFiles> s3_folder(const storage::ObjectUri& uri, const storage::S3Options& s3, const std::string& source,
                              const std::string& given) {
  storage::ListOptions options;
  options.max_objects = kMaxShardsPerSource;
  MMFEED_ASSIGN_OR_RETURN(auto objects, storage::list_objects(s3, uri.bucket, uri.key, options));
  std::vector<std::string> files;
  for (const storage::S3Object& o : objects) {
    const std::string_view rest = std::string_view(o.key).substr(uri.key.size());
    if (rest == ".nv-meta/split.yaml") return SourceFiles{Layout::kEnergon, {given}};
    if (rest == "state.json") {
      return Error(ErrorCode::kUnsupported,
                   "is a save_to_disk folder: its Arrow files are read from a local disk (copy the folder, or write "
                   "Parquet with to_parquet)",
                   source);
    }
    bool hidden = rest.starts_with('.') || rest.find("/.") != std::string_view::npos;
    if (!hidden && is_data_file(file_name(rest))) files.push_back("s3://" + uri.bucket + "/" + o.key);
  }
  if (files.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "is a prefix of no layout mmfeed reads: no .parquet, .tar, .jsonl or .json objects, and no "
                 ".nv-meta/split.yaml",
                 source);
  }
  MMFEED_RETURN_IF_ERROR(one_split(files, source));
  MMFEED_ASSIGN_OR_RETURN(Layout layout, one_layout(files, source));
  return SourceFiles{layout, std::move(files)};
}

}  // namespace

Layout layout_of(std::string_view name) {
  if (name.ends_with(".parquet")) return Layout::kParquet;
  if (name.ends_with(".tar")) return Layout::kShards;
  if (name.ends_with(".arrow")) return Layout::kArrow;
  return Layout::kManifest;
}

bool has_wildcard(std::string_view path) {
  if (path.starts_with("http://") || path.starts_with("https://")) {  // '?' opens a URL's query
    return path.substr(0, path.find_first_of("?#")).find('*') != std::string_view::npos;
  }
  return path.find_first_of("*?") != std::string_view::npos;
}

bool glob_match(std::string_view pattern, std::string_view name) {
  // Iterative matching with one backtrack point for the last '*', which never crosses a '/'.
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' ? name[n] != '/' : pattern[p] == name[n]) && pattern[p] != '*') {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos && name[resume] != '/') {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Result<SourceFiles> source_files(const std::string& source, const storage::S3Options& s3) {
  const std::string shown = storage::redact_uri(source);
  const bool http = source.starts_with("http://") || source.starts_with("https://");
  const bool remote = source.find("://") != std::string::npos && !source.starts_with("file://");
  if (has_wildcard(source)) {
    if (http) {
      return Error(ErrorCode::kInvalidArgument,
                   "a glob ('*', '?') needs a listing, which http(s) has not: name the files (a brace pattern: "
                   "train-{00000..00009}.parquet)",
                   shown);
    }
    MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> patterns, expand_braces(source));
    std::vector<std::string> files;
    for (const std::string& pattern : patterns) {
      std::vector<std::string> found;
      if (remote) {
        MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(pattern));
        if (uri.scheme != storage::Scheme::kS3) {
          return Error(ErrorCode::kInvalidArgument, "a glob is listed on local disks and s3:// only", shown);
        }
        MMFEED_ASSIGN_OR_RETURN(found, glob_s3(uri, s3));
      } else {
        MMFEED_ASSIGN_OR_RETURN(found, glob_local(pattern.starts_with("file://") ? pattern.substr(7) : pattern));
      }
      files.insert(files.end(), found.begin(), found.end());
      MMFEED_ASSIGN_OR_RETURN(files, checked_count(std::move(files), shown));
    }
    if (files.empty()) return Error(ErrorCode::kNotFound, "matches no file", shown);
    MMFEED_ASSIGN_OR_RETURN(Layout layout, one_layout(files, shown));
    return SourceFiles{layout, std::move(files)};
  }
  if (source.starts_with("s3://") && source.ends_with('/')) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(source));
    return s3_folder(uri, s3, shown, source);
  }
  if (is_energon_dataset(source)) return SourceFiles{Layout::kEnergon, {source}};
  if (!remote) {
    const std::string local = source.starts_with("file://") ? source.substr(7) : source;
    std::error_code ec;
    if (fs::is_directory(local, ec)) {
      std::string dir = local;
      while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
      return local_folder(dir, shown);
    }
  }
  const Layout layout = layout_of(source);
  if (layout == Layout::kManifest) return SourceFiles{layout, {source}};
  MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> files, expand_braces(source));
  return SourceFiles{layout, std::move(files)};
}

}  // namespace mmfeed::dataset
