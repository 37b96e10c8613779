#pragma once
// Reading whole BPF hash maps: by batch where the kernel has it, else key by key. Shared by the
// collector's readers (collect/bpf_maps.cpp, collect/requests.cpp, collect/iowq.cpp), and
// reading a BPF iterator's records.
#include <bpf/bpf.h>
#include <unistd.h>

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

// Reads an open BPF iterator to its end, its records appended straight into out: a program's
// bpf_seq_write either fits the seq_file's buffer or moves to the next read(), so the bytes are
// whole records back to back. out grows `chunk` records at a time, so only what a read is about
// to fill is initialised (RingRecords leaves it unwritten). A failed read keeps the records
// before it and sets read_errno. False on a partial record at the end: the daemon and the BPF
// object disagree on the record's layout, and out is left as it was.
template <typename Vec>
inline bool read_iter_into(int iter_fd, Vec& out, std::size_t chunk, int& read_errno) {
    using R = typename Vec::value_type;
    const std::size_t first = out.size();
    std::size_t have = 0;  // bytes read
    read_errno = 0;
    // EAGAIN means the kernel visited a million objects without output and kept its place: read
    // on. The bound only stops a walk that could never end (a billion files without a record).
    int again = 0;
    for (;;) {
        const std::size_t room = (out.size() - first) * sizeof(R) - have;
        if (room < sizeof(R)) {
            out.resize(out.size() + chunk);
            continue;
        }
        const ssize_t n = ::read(iter_fd, reinterpret_cast<char*>(out.data() + first) + have, room);
        if (n < 0 && (errno == EINTR || (errno == EAGAIN && ++again < 1000))) continue;
        if (n < 0) {
            read_errno = errno;
            break;
        }
        if (n == 0) break;
        have += static_cast<std::size_t>(n);
    }
    if (have % sizeof(R) != 0) {
        out.resize(first);
        return false;
    }
    out.resize(first + have / sizeof(R));
    return true;
}

// Runs the iterator of link_fd once, appending its records to out. False, with errno set, on a
// failed read or a partial record (EPROTO).
template <typename R>
inline bool read_iter_records(int link_fd, std::vector<R>& out) {
    const int fd = bpf_iter_create(link_fd);
    if (fd < 0) return false;
    int err = 0;
    const bool whole = read_iter_into(fd, out, 64, err);
    ::close(fd);
    errno = !whole ? EPROTO : err;
    return whole && err == 0;
}

}  // namespace iouscope
