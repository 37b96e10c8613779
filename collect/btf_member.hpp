#pragma once
// Whether a struct in a BTF has a member of that name. collect/kernel_features asks the running
// kernel's BTF for the seeds' io_sq_data fields; the live tests ask the same question to decide
// what the kernel under test must do, so both use this one loop.
#include <bpf/btf.h>

#include <string>

namespace iouscope {

inline bool btf_has_member(const struct btf* b, const std::string& type,
                           const std::string& member) {
    const int id = b ? btf__find_by_name_kind(b, type.c_str(), BTF_KIND_STRUCT) : -1;
    if (id <= 0) return false;
    const struct btf_type* t = btf__type_by_id(b, static_cast<__u32>(id));
    const struct btf_member* m = btf_members(t);
    for (unsigned i = 0; i < btf_vlen(t); ++i, ++m)
        if (member == btf__name_by_offset(b, m->name_off)) return true;
    return false;
}

}  // namespace iouscope
