#include "storage/credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace mmfeed::storage {
namespace {

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-creds-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / ".aws");
    env_["HOME"] = dir_.string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }

  Result<S3Options> resolve() {
    return s3_options_from_environment([this](std::string_view name) -> std::optional<std::string> {
      auto it = env_.find(std::string(name));
      if (it == env_.end()) return std::nullopt;
      return it->second;
    });
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(CredentialsTest, NothingConfiguredMeansAnonymousInUsEast1) {
  auto o = resolve();
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->credentials.empty());
  EXPECT_EQ(o->region, "us-east-1");
  EXPECT_EQ(o->endpoint, "");
}

TEST_F(CredentialsTest, EnvironmentWinsOverFiles) {
  write(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
  env_["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env_["AWS_SECRET_ACCESS_KEY"] = "ENVSECRET";
  env_["AWS_SESSION_TOKEN"] = "TOKEN";
  env_["AWS_REGION"] = "eu-west-3";
  env_["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000/";
  auto o = resolve();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->credentials.access_key_id, "ENVKEY");
  EXPECT_EQ(o->credentials.session_token, "TOKEN");
  EXPECT_EQ(o->credentials.source, "environment");
  EXPECT_EQ(o->region, "eu-west-3");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:9000");
}

TEST_F(CredentialsTest, NamedProfileFromBothFiles) {
  write(".aws/credentials",
        "# comment\n[default]\naws_access_key_id=D\naws_secret_access_key=DS\n\n"
        "[dev]\n aws_access_key_id = DEV \naws_secret_access_key = DEVSECRET\naws_session_token = T\n");
  write(".aws/config",
        "[default]\nregion = us-west-2\n[profile dev]\nregion = ap-south-1\n"
        "endpoint_url = http://minio:9000\ns3 =\n  addressing_style = path\n");
  env_["AWS_PROFILE"] = "dev";
  auto o = resolve();
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->credentials.access_key_id, "DEV");
  EXPECT_EQ(o->credentials.secret_access_key, "DEVSECRET");
  EXPECT_EQ(o->credentials.session_token, "T");
  EXPECT_NE(o->credentials.source.find("profile dev"), std::string::npos);
  EXPECT_EQ(o->region, "ap-south-1");
  EXPECT_EQ(o->endpoint, "http://minio:9000");
}

TEST_F(CredentialsTest, ConfigFileMayHoldTheKeys) {
  write(".aws/config", "[default]\naws_access_key_id = C\naws_secret_access_key = CS\nregion = sa-east-1\n");
  auto o = resolve();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->credentials.access_key_id, "C");
  EXPECT_EQ(o->region, "sa-east-1");
}

TEST_F(CredentialsTest, ExplicitFilePathsAreHonoured) {
  write("creds.ini", "[default]\naws_access_key_id = X\naws_secret_access_key = XS\n");
  env_["AWS_SHARED_CREDENTIALS_FILE"] = (dir_ / "creds.ini").string();
  auto o = resolve();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->credentials.access_key_id, "X");
}

TEST_F(CredentialsTest, MissingNamedProfileIsAnError) {
  env_["AWS_PROFILE"] = "nope";
  auto o = resolve();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message().find("profile 'nope'"), std::string::npos);
}

TEST_F(CredentialsTest, HalfAKeyPairIsAnErrorThatNeverPrintsTheSecret) {
  env_["AWS_SECRET_ACCESS_KEY"] = "TOPSECRET";
  auto o = resolve();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().to_string().find("TOPSECRET"), std::string::npos);
  env_.erase("AWS_SECRET_ACCESS_KEY");
  write(".aws/credentials", "[default]\naws_access_key_id = ONLYKEY\n");
  EXPECT_FALSE(resolve().ok());
}

TEST_F(CredentialsTest, MalformedFileIsAnErrorWithItsLine) {
  write(".aws/credentials", "[default\naws_access_key_id = K\n");
  auto o = resolve();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().context().find("credentials:1"), std::string::npos);
}

}  // namespace
}  // namespace mmfeed::storage
