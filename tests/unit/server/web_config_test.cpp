// --web.config.file parsing and the basic-auth check, without a server.
#include "server/web_config.hpp"

#include <crypt.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using iouscope::authorized;
using iouscope::load_web_config;
using iouscope::WebConfig;

namespace {

// A bcrypt hash at the lowest cost, so the tests stay fast.
std::string bcrypt(const std::string& password) {
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    if (!crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt)) return "";
    crypt_data data{};
    const char* h = crypt_r(password.c_str(), salt, &data);
    return h ? h : "";
}

std::string base64(const std::string& in) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    unsigned val = 0;
    int bits = -6;
    for (unsigned char c : in) {
        val = (val << 8) + c;
        bits += 8;
        while (bits >= 0) {
            out.push_back(t[(val >> bits) & 0x3F]);
            bits -= 6;
        }
    }
    if (bits > -6) out.push_back(t[((val << 8) >> (bits + 8)) & 0x3F]);
    while (out.size() % 4) out.push_back('=');
    return out;
}

const char* kKey = "-----BEGIN PRIVATE KEY-----\nMIG...\n-----END PRIVATE KEY-----\n";
const char* kCert = "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n";

class WebConfigTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("iouscope-webcfg-" + std::to_string(getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string write(const std::string& name, const std::string& text,
                      fs::perms p = fs::perms::owner_read | fs::perms::owner_write) {
        auto path = dir_ / name;
        std::ofstream(path) << text;
        fs::permissions(path, p);
        return path.string();
    }
    // The error of loading `text` as a web config, or "" when it loads.
    std::string error_of(const std::string& text, WebConfig* out = nullptr) {
        WebConfig cfg;
        auto err = load_web_config(write("web.yml", text), cfg);
        if (out) *out = cfg;
        return err.value_or("");
    }
    fs::path dir_;
};

}  // namespace

TEST_F(WebConfigTest, BasicAuthUsersLoad) {
    const auto hash = bcrypt("pw");
    ASSERT_EQ(hash.rfind("$2b$04$", 0), 0u);
    WebConfig cfg;
    EXPECT_EQ(error_of("basic_auth_users:\n  alice: '" + hash + "'\n  bob: '" + hash + "'\n", &cfg),
              "");
    EXPECT_EQ(cfg.users.size(), 2u);
    EXPECT_FALSE(cfg.tls());
}

TEST_F(WebConfigTest, TlsPathsResolveAgainstTheConfigsDirectory) {
    write("key.pem", kKey);
    write("cert.pem", kCert);
    WebConfig cfg;
    EXPECT_EQ(error_of("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n", &cfg),
              "");
    EXPECT_TRUE(cfg.tls());
    EXPECT_EQ(cfg.key_file, (dir_ / "key.pem").string());
    EXPECT_EQ(cfg.cert_file, (dir_ / "cert.pem").string());
    const auto abs = (dir_ / "cert.pem").string();
    EXPECT_EQ(error_of("tls_server_config:\n  cert_file: " + abs + "\n  key_file: key.pem\n", &cfg),
              "");
    EXPECT_EQ(cfg.cert_file, abs);
}

TEST_F(WebConfigTest, Refusals) {
    using P = fs::perms;
    const auto rw = P::owner_read | P::owner_write;
    write("key.pem", kKey);
    write("cert.pem", kCert);
    write("open-key.pem", kKey, rw | P::others_read | P::others_write);
    const std::string tls = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n";
    auto refused = [&](const std::string& text, const std::string& needle) {
        auto err = error_of(text);
        EXPECT_NE(err.find(needle), std::string::npos) << "config:\n" << text << "error: " << err;
    };
    refused("basic_auth_users:\n  alice: s3cret\n", "must be a bcrypt hash");
    refused("basic_auth_user:\n  alice: x\n", "unknown key \"basic_auth_user\"");
    refused("basic_auth_users: [\n", "web config");
    refused("tls_server_config:\n  key_file: key.pem\n", "needs cert_file and key_file");
    refused("tls_server_config: yes\n", "must be a map");
    refused("tls_server_config:\n  cert_file: cert.pem\n  key_file: open-key.pem\n",
            "open-key.pem is world-writable");
    refused("tls_server_config:\n  cert_file: cert.pem\n  key_file: gone.pem\n", "No such file");
    refused("tls_server_config:\n  cert_file: key.pem\n  key_file: cert.pem\n",
            "not a PEM file with a PRIVATE KEY block");
    refused("tls_server_config:\n  cert_file: key.pem\n  key_file: key.pem\n",
            "not a PEM file with a CERTIFICATE block");
    refused(tls + "  client_auth_type: RequireAndVerifyClientCert\n",
            "\"client_auth_type\" is not supported");
    refused(tls + "  min_version: TLS13\n", "\"min_version\" is not supported");
    // The file itself, world-writable.
    WebConfig cfg;
    auto err = load_web_config(write("open.yml", tls, rw | P::others_write), cfg);
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->find("world-writable"), std::string::npos) << *err;
    err = load_web_config((dir_ / "missing.yml").string(), cfg);
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->find("No such file"), std::string::npos) << *err;
}

TEST(WebConfigAuth, ChecksTheBasicCredentials) {
    WebConfig cfg;
    EXPECT_TRUE(authorized(cfg, nullptr)) << "no users: no auth";
    cfg.users["alice"] = bcrypt("s3cret");
    cfg.users["bob"] = bcrypt("with:colon");
    EXPECT_TRUE(authorized(cfg, ("Basic " + base64("alice:s3cret")).c_str()));
    EXPECT_TRUE(authorized(cfg, ("Basic " + base64("bob:with:colon")).c_str()));
    EXPECT_FALSE(authorized(cfg, nullptr));
    EXPECT_FALSE(authorized(cfg, ""));
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("alice:nope")).c_str()));
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("alice:s3cret ")).c_str()));
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("alice:")).c_str()));
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("mallory:s3cret")).c_str()));
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("alices3cret")).c_str()));
    EXPECT_FALSE(authorized(cfg, ("Bearer " + base64("alice:s3cret")).c_str()));
    EXPECT_FALSE(authorized(cfg, "Basic !!!!"));
    EXPECT_FALSE(authorized(cfg, "Basic YWxpY2U6czNjcmV0=x"));
    // A user whose stored hash is not bcrypt (cannot come from load_web_config) never matches.
    cfg.users["eve"] = "plain";
    EXPECT_FALSE(authorized(cfg, ("Basic " + base64("eve:plain")).c_str()));
}
