// Where S3 requests go and how they are signed: region, endpoint, addressing style and
// credentials, resolved the way the AWS CLI and boto3 resolve them.
//
// Order: credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN),
// else the profile (AWS_PROFILE, or "default") in the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), else that profile in the config file
// (AWS_CONFIG_FILE or ~/.aws/config); none found means anonymous (unsigned) requests. Region:
// AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1. Endpoint:
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else AWS.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(S3Options s3, s3_options_from_environment());
//   s3.endpoint = "http://127.0.0.1:9000";   // any field may be overridden afterwards
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "mmfeed/error.h"

namespace mmfeed::storage {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only
  std::string source;         // where they came from ("environment", "profile dev in ~/.aws/credentials")

  bool empty() const { return access_key_id.empty(); }
};

enum class Addressing {
  kAuto,     // path-style for a custom endpoint, virtual-hosted on AWS when the bucket allows
  kPath,     // https://endpoint/bucket/key
  kVirtual,  // https://bucket.endpoint/key
};

struct S3Options {
  std::string region = "us-east-1";
  std::string endpoint;  // "http://127.0.0.1:9000"; empty: https://s3.<region>.amazonaws.com
  Addressing addressing = Addressing::kAuto;
  bool anonymous = false;  // send unsigned requests even when credentials exist
  Credentials credentials;
};

// Reads an environment variable; tests substitute their own.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
std::optional<std::string> process_env(std::string_view name);

// Resolves S3Options as described above. kInvalidArgument when AWS_PROFILE names a profile
// that no file defines, or a credentials file is malformed; kInvalidArgument also when only
// one of the access key id / secret is given.
Result<S3Options> s3_options_from_environment(const EnvLookup& env = process_env);

}  // namespace mmfeed::storage
