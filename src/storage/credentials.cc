#include "storage/credentials.h"

#include <cstdlib>
#include <fstream>
#include <map>

#include "core/strings.h"

namespace mmfeed::storage {

std::optional<std::string> process_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

namespace {

using IniFile = std::map<std::string, std::map<std::string, std::string>>;

// The AWS INI dialect: [section], key = value, '#' and ';' comment lines. nullopt when the
// file does not exist.
Result<std::optional<IniFile>> read_ini(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::optional<IniFile>();
  IniFile ini;
  std::string line;
  std::string section;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = core::trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      if (t.back() != ']') {
        return Error(ErrorCode::kInvalidArgument, "unterminated section header", path + ":" + std::to_string(line_no));
      }
      section = core::trim(std::string_view(t).substr(1, t.size() - 2));
      ini[section];
      continue;
    }
    const auto eq = t.find('=');
    if (eq == std::string::npos) continue;  // nested values (s3 =\n  key = v) are not ours
    if (section.empty()) {
      return Error(ErrorCode::kInvalidArgument, "key outside any [section]", path + ":" + std::to_string(line_no));
    }
    ini[section][core::trim(std::string_view(t).substr(0, eq))] = core::trim(std::string_view(t).substr(eq + 1));
  }
  return std::optional<IniFile>(std::move(ini));
}

std::string get(const EnvLookup& env, std::string_view name) { return env(name).value_or(""); }

}  // namespace

Result<S3Options> s3_options_from_environment(const EnvLookup& env) {
  S3Options options;
  const std::string home = get(env, "HOME");
  const std::string explicit_profile = get(env, "AWS_PROFILE");
  const std::string profile = explicit_profile.empty() ? "default" : explicit_profile;
  std::string credentials_path = get(env, "AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_path.empty() && !home.empty()) credentials_path = home + "/.aws/credentials";
  std::string config_path = get(env, "AWS_CONFIG_FILE");
  if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";

  MMFEED_ASSIGN_OR_RETURN(auto credentials_file, read_ini(credentials_path));
  MMFEED_ASSIGN_OR_RETURN(auto config_file, read_ini(config_path));
  const std::map<std::string, std::string>* cred_section = nullptr;
  const std::map<std::string, std::string>* config_section = nullptr;
  if (credentials_file) {
    if (auto it = credentials_file->find(profile); it != credentials_file->end()) cred_section = &it->second;
  }
  if (config_file) {
    const std::string name = profile == "default" ? "default" : "profile " + profile;
    if (auto it = config_file->find(name); it != config_file->end()) config_section = &it->second;
  }
  if (!explicit_profile.empty() && cred_section == nullptr && config_section == nullptr) {
    return Error(ErrorCode::kInvalidArgument, "AWS_PROFILE names profile '" + profile + "', which neither " +
                                                  credentials_path + " nor " + config_path + " defines");
  }
  auto lookup = [](const std::map<std::string, std::string>* section, const char* key) -> std::string {
    if (section == nullptr) return {};
    auto it = section->find(key);
    return it == section->end() ? std::string() : it->second;
  };

  const std::string env_key = get(env, "AWS_ACCESS_KEY_ID");
  const std::string env_secret = get(env, "AWS_SECRET_ACCESS_KEY");
  if (env_key.empty() != env_secret.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set; set both or neither");
  }
  Credentials& c = options.credentials;
  if (!env_key.empty()) {
    c = {env_key, env_secret, get(env, "AWS_SESSION_TOKEN"), "environment"};
  } else {
    for (const auto& [section, path] :
         {std::pair{cred_section, credentials_path}, std::pair{config_section, config_path}}) {
      const std::string key = lookup(section, "aws_access_key_id");
      const std::string secret = lookup(section, "aws_secret_access_key");
      if (key.empty() && secret.empty()) continue;
      if (key.empty() || secret.empty()) {
        return Error(ErrorCode::kInvalidArgument,
                     "profile '" + profile +
                         "' has only one of "
                         "aws_access_key_id and aws_secret_access_key",
                     path);
      }
      c = {key, secret, lookup(section, "aws_session_token"), "profile " + profile + " in " + path};
      break;
    }
  }

  for (const std::string& region :
       {get(env, "AWS_REGION"), get(env, "AWS_DEFAULT_REGION"), lookup(config_section, "region")}) {
    if (!region.empty()) {
      options.region = region;
      break;
    }
  }
  for (const std::string& endpoint :
       {get(env, "AWS_ENDPOINT_URL_S3"), get(env, "AWS_ENDPOINT_URL"), lookup(config_section, "endpoint_url")}) {
    if (!endpoint.empty()) {
      options.endpoint = endpoint;
      break;
    }
  }
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  return options;
}

}  // namespace mmfeed::storage
