#pragma once
// --web.config.file, in the format of Prometheus exporter-toolkit so operators reuse what they
// already deploy for node_exporter:
//   tls_server_config: {cert_file: PATH, key_file: PATH}
//   basic_auth_users: {USER: BCRYPT_HASH, ...}
#include <map>
#include <optional>
#include <string>

namespace iouscope {

struct WebConfig {
    std::string cert_file, key_file;           // both set: serve HTTPS only
    std::map<std::string, std::string> users;  // user -> bcrypt hash; empty: no auth
    bool tls() const { return !cert_file.empty(); }
};

// Reads and validates the file. Refuses a file (or a key file) that anyone may write: whoever
// can edit it decides who reads the metrics. Returns an error message on failure.
std::optional<std::string> load_web_config(const std::string& path, WebConfig& out);

// Checks an "Authorization" header value against the users; true when no users are configured.
bool authorized(const WebConfig& cfg, const char* authorization_header);

}  // namespace iouscope
