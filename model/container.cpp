#include "model/container.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace iouscope {

namespace {

bool lower_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// A container id as every runtime here writes it: 64 lowercase hex digits.
bool is_hex_id(std::string_view s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), lower_hex);
}

// A pod UID: 36 characters of hex digits and four separators, '-' or (systemd) '_'.
bool is_uid(std::string_view s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const bool sep = i == 8 || i == 13 || i == 18 || i == 23;
        if (sep ? (s[i] != '-' && s[i] != '_') : !lower_hex(s[i])) return false;
    }
    return true;
}

std::vector<std::string_view> components(std::string_view path) {
    std::vector<std::string_view> out;
    while (!path.empty()) {
        const auto slash = path.find('/');
        if (slash != 0) out.push_back(path.substr(0, slash));
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
    }
    return out;
}

struct ScopeForm {
    std::string_view prefix, runtime, scheme;
};

// systemd scope units that each runtime creates for a container.
constexpr std::array<ScopeForm, 4> kScopes = {{
    {"cri-containerd-", "containerd", "containerd"},
    {"crio-", "cri-o", "cri-o"},
    {"docker-", "docker", "docker"},
    {"libpod-", "podman", "podman"},
}};

// One path component as a container: a runtime's scope unit, or a bare id.
bool container_component(std::string_view c, ContainerIdentity& out) {
    for (const auto& f : kScopes) {
        if (!c.starts_with(f.prefix)) continue;
        // The systemd driver's scope unit, or the cgroupfs driver's same name without
        // ".scope" (podman's /libpod_parent/libpod-<id>, CRI-O's crio-<id>).
        auto id = c.substr(f.prefix.size());
        if (id.ends_with(".scope")) id.remove_suffix(6);
        if (!is_hex_id(id)) continue;
        out.runtime = f.runtime;
        out.container_id = std::string(f.scheme) + "://" + std::string(id);
        return true;
    }
    if (!is_hex_id(c)) return false;
    out.runtime.clear();
    out.container_id = std::string(c);
    return true;
}

// One path component as a pod: "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid_>.slice".
bool pod_component(std::string_view c, std::string& uid) {
    if (c.ends_with(".slice")) c.remove_suffix(6);
    const auto at = c.rfind("pod");
    if (at == std::string_view::npos || (at != 0 && c[at - 1] != '-')) return false;
    const auto u = c.substr(at + 3);
    if (!is_uid(u)) return false;
    uid = std::string(u);
    std::replace(uid.begin(), uid.end(), '_', '-');
    return true;
}

}  // namespace

ContainerIdentity container_of_cgroup(std::string_view path) {
    ContainerIdentity id;
    // The innermost of each: a container nested in another (docker-in-docker, a pod's
    // sandbox) belongs to the inner one.
    for (const auto c : components(path)) {
        ContainerIdentity inner;
        if (container_component(c, inner)) {
            id.container_id = inner.container_id;
            id.runtime = inner.runtime;
        }
        std::string uid;
        if (pod_component(c, uid)) id.pod_uid = uid;
    }
    // The docker cgroupfs layout names its runtime in the parent: /docker/<id>.
    const auto parts = components(path);
    for (std::size_t i = 1; i < parts.size(); ++i)
        if (parts[i - 1] == "docker" && is_hex_id(parts[i]) && id.container_id == parts[i]) {
            id.runtime = "docker";
            id.container_id = "docker://" + id.container_id;
        }
    return id;
}

}  // namespace iouscope
