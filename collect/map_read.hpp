#pragma once
// Reading whole BPF hash maps: by batch where the kernel has it, else key by key. Shared by the
// collector's readers (collect/bpf_maps.cpp, collect/requests.cpp).
#include <bpf/bpf.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

namespace iouscope {

template <typename K, typename V>
inline void read_hash_by_key(int map_fd, std::vector<std::pair<K, V>>& out) {
    K key{}, next{};
    K* prev = nullptr;
    while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
        V val{};
        if (bpf_map_lookup_elem(map_fd, &next, &val) == 0) out.emplace_back(next, val);
        key = next;
        prev = &key;
    }
}

// Reads a whole hash map with BPF_MAP_LOOKUP_BATCH (or LOOKUP_AND_DELETE_BATCH when drain is
// set): one bpf() call per batch instead of two per entry, which is what keeps a sample cheap
// when thousands of rings churn. Kernels or maps without batch operations get the per-key walk
// (and the caller's own deletes).
template <typename K, typename V>
inline bool read_hash_batch(int map_fd, std::vector<std::pair<K, V>>& out, bool drain) {
    const auto start = out.size();
    std::uint32_t chunk = 256;
    std::vector<K> keys(chunk);
    std::vector<V> vals(chunk);
    std::uint64_t in_batch = 0, out_batch = 0;  // the kernel's cursor (a bucket index)
    bool first = true;
    for (;;) {
        std::uint32_t count = chunk;
        int rc =
            drain ? bpf_map_lookup_and_delete_batch(map_fd, first ? nullptr : &in_batch, &out_batch,
                                                    keys.data(), vals.data(), &count, nullptr)
                  : bpf_map_lookup_batch(map_fd, first ? nullptr : &in_batch, &out_batch,
                                         keys.data(), vals.data(), &count, nullptr);
        const int err = rc < 0 ? -rc : 0;
        for (std::uint32_t i = 0; i < count && i < chunk; ++i) out.emplace_back(keys[i], vals[i]);
        if (err == ENOENT) return true;  // the end of the map
        if (err == ENOSPC && count == 0) {
            // One hash bucket holds more entries than the batch: a larger batch takes it whole.
            chunk *= 2;
            keys.resize(chunk);
            vals.resize(chunk);
            continue;
        }
        if (err) {
            if (out.size() != start && drain)
                return true;  // drained what it read; the rest next time
            out.resize(start);
            return false;
        }
        in_batch = out_batch;
        first = false;
    }
}

template <typename K, typename V>
inline void read_hash(int map_fd, std::vector<std::pair<K, V>>& out) {
    if (!read_hash_batch(map_fd, out, false)) read_hash_by_key(map_fd, out);
}

}  // namespace iouscope
