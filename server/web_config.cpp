#include "server/web_config.hpp"

#include <crypt.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace iouscope {

namespace {

std::optional<std::string> check_not_world_writable(const std::string& path, const char* what) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return std::string(what) + " " + path + ": " + std::strerror(errno);
    if (st.st_mode & S_IWOTH)
        return std::string(what) + " " + path +
               " is world-writable: anyone could change who may read the metrics. "
               "Fix it with chmod o-w " +
               path;
    return std::nullopt;
}

// Reads a PEM file far enough to give a clear start-up error for the usual mistakes (a path to
// the wrong file, key and certificate swapped, DER instead of PEM). The TLS library checks the
// rest (key matches certificate, format) when the server starts.
std::optional<std::string> check_pem(const std::string& path, const char* what, const char* label) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::string(what) + " " + path + ": " + std::strerror(errno);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.find("-----BEGIN ") == std::string::npos ||
        text.find(std::string(label) + "-----") == std::string::npos)
        return std::string(what) + " " + path + " is not a PEM file with a " + label +
               " block (-----BEGIN ..." + label + "-----)";
    return std::nullopt;
}

// Hand-written: base64 is needed only to read the Basic credentials, and this keeps the check
// independent of the HTTP library (libmicrohttpd's own Basic parser would tie the unit-testable
// part to a running server; OpenSSL would be a new dependency for twenty lines).
std::optional<std::string> base64_decode(std::string_view in) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    std::string out;
    unsigned buf = 0;
    int bits = 0;
    std::size_t i = 0;
    for (; i < in.size() && in[i] != '='; ++i) {
        int v = val(in[i]);
        if (v < 0) return std::nullopt;
        buf = (buf << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((buf >> bits) & 0xFF));
        }
    }
    for (; i < in.size(); ++i)
        if (in[i] != '=') return std::nullopt;
    return out;
}

}  // namespace

std::optional<std::string> load_web_config(const std::string& path, WebConfig& out) {
    if (auto err = check_not_world_writable(path, "web config")) return err;
    YAML::Node root;
    try {
        root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
        return "web config " + path + ": " + e.what();
    }
    const auto dir = std::filesystem::path(path).parent_path();
    auto resolve = [&](const std::string& p) {
        return std::filesystem::path(p).is_absolute() ? p : (dir / p).string();
    };
    try {
        for (const auto& kv : root) {
            const auto key = kv.first.as<std::string>();
            if (key == "tls_server_config") {
                // Only a server certificate. Anything else exporter-toolkit knows (client_ca_file
                // and client_auth_type for mutual TLS, min_version, cipher_suites, ...) is refused
                // rather than ignored: a silently ignored client_auth_type would leave the
                // operator believing that only clients with certificates get in.
                if (!kv.second.IsMap())
                    return "web config " + path +
                           ": tls_server_config must be a map with "
                           "cert_file and key_file";
                for (const auto& t : kv.second) {
                    const auto tkey = t.first.as<std::string>();
                    if (tkey != "cert_file" && tkey != "key_file")
                        return "web config " + path + ": tls_server_config: \"" + tkey +
                               "\" is not supported (only cert_file and key_file; no client "
                               "certificates, TLS 1.2 and 1.3 with the system's defaults)";
                }
                out.cert_file = resolve(kv.second["cert_file"].as<std::string>(""));
                out.key_file = resolve(kv.second["key_file"].as<std::string>(""));
                if (kv.second["cert_file"].as<std::string>("").empty() ||
                    kv.second["key_file"].as<std::string>("").empty())
                    return "web config " + path +
                           ": tls_server_config needs cert_file and key_file";
                if (auto err = check_not_world_writable(out.key_file, "TLS key")) return err;
                if (auto err = check_not_world_writable(out.cert_file, "TLS certificate"))
                    return err;
                if (auto err = check_pem(out.key_file, "TLS key", "PRIVATE KEY")) return err;
                if (auto err = check_pem(out.cert_file, "TLS certificate", "CERTIFICATE"))
                    return err;
            } else if (key == "basic_auth_users") {
                for (const auto& u : kv.second) {
                    auto hash = u.second.as<std::string>();
                    if (hash.rfind("$2", 0) != 0)
                        return "web config " + path + ": the password of user " +
                               u.first.as<std::string>() +
                               " must be a bcrypt hash ($2y$, $2b$ or $2a$), not plain text";
                    out.users[u.first.as<std::string>()] = hash;
                }
            } else {
                return "web config " + path + ": unknown key \"" + key +
                       "\" (expected tls_server_config or basic_auth_users)";
            }
        }
    } catch (const YAML::Exception& e) {
        return "web config " + path + ": " + e.what();
    }
    return std::nullopt;
}

bool authorized(const WebConfig& cfg, const char* header) {
    if (cfg.users.empty()) return true;
    if (!header || std::strncmp(header, "Basic ", 6) != 0) return false;
    auto creds = base64_decode(header + 6);
    if (!creds) return false;
    auto colon = creds->find(':');
    if (colon == std::string::npos) return false;
    auto it = cfg.users.find(creds->substr(0, colon));
    if (it == cfg.users.end()) return false;
    crypt_data data{};
    const char* got = crypt_r(creds->substr(colon + 1).c_str(), it->second.c_str(), &data);
    // bcrypt output has a fixed length for a given hash; compare all of it regardless.
    if (!got || std::strlen(got) != it->second.size()) return false;
    unsigned diff = 0;
    for (std::size_t i = 0; i < it->second.size(); ++i)
        diff |= static_cast<unsigned char>(got[i]) ^ static_cast<unsigned char>(it->second[i]);
    return diff == 0;
}

}  // namespace iouscope
