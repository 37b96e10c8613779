#include "exporters/web_config.hpp"

#include <crypt.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>

namespace uringscope {

namespace {

std::optional<std::string> check_not_world_writable(const std::string& path, const char* what) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return std::string(what) + " " + path + ": " + std::strerror(errno);
    if (st.st_mode & S_IWOTH)
        return std::string(what) + " " + path +
               " is world-writable: anyone could change who may read the metrics. "
               "Fix it with chmod o-w " + path;
    return std::nullopt;
}

// Hand-written: base64 is needed only to read the Basic credentials, and none of the project's
// libraries exports a decoder (civetweb 1.15 only encodes; OpenSSL would be a new dependency
// for twenty lines).
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
                out.cert_file = resolve(kv.second["cert_file"].as<std::string>(""));
                out.key_file = resolve(kv.second["key_file"].as<std::string>(""));
                if (kv.second["cert_file"].as<std::string>("").empty() ||
                    kv.second["key_file"].as<std::string>("").empty())
                    return "web config " + path + ": tls_server_config needs cert_file and key_file";
                if (auto err = check_not_world_writable(out.key_file, "TLS key")) return err;
                if (auto err = check_not_world_writable(out.cert_file, "TLS certificate")) return err;
                // Debian bookworm's civetweb 1.15 loads OpenSSL at run time through a table
                // written for an older OpenSSL API; with OpenSSL 3 one entry stays NULL and the
                // first TLS handshake crashes the daemon (seen here: SIGSEGV in a civetweb
                // worker). Refusing beats serving a daemon that dies on its first scrape.
                return "web config " + path + ": tls_server_config is not supported by this "
                       "build: the system's civetweb cannot use OpenSSL 3. Terminate TLS in front "
                       "of uringscoped (e.g. stunnel or an nginx/envoy sidecar) and keep it on "
                       "127.0.0.1; basic_auth_users works without TLS";
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

}  // namespace uringscope
