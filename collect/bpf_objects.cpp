// The per-tier BPF objects: opening, the handing over of shared maps, loading in order.
#include "collect/bpf_objects.hpp"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "iouscope.skel.h"
#include "iouscope_deep.skel.h"
#include "iouscope_gaps.skel.h"
#include "iouscope_nocast.skel.h"
#include "iouscope_nvme.skel.h"
#include "iouscope_req.skel.h"

namespace iouscope {

// iouscope_nocast is iouscope.bpf.c without its kfunc extern: the same maps, programs and
// global sections, so its object opens into the default tier's skeleton, whose code then
// reads and writes them as ever. What the generated iouscope_bpf__open() does, with the other
// object's bytes.
static_assert(sizeof(iouscope_bpf) == sizeof(iouscope_nocast_bpf));
static_assert(sizeof(*iouscope_bpf{}.rodata) == sizeof(*iouscope_nocast_bpf{}.rodata));
static_assert(sizeof(*iouscope_bpf{}.bss) == sizeof(*iouscope_nocast_bpf{}.bss));

namespace {

iouscope_bpf* open_core_without_cast() {
    auto* s = static_cast<iouscope_bpf*>(calloc(1, sizeof(iouscope_bpf)));
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    int err = iouscope_bpf__create_skeleton(s);
    if (!err) {
        s->skeleton->data = iouscope_nocast_bpf__elf_bytes(&s->skeleton->data_sz);
        err = bpf_object__open_skeleton(s->skeleton, nullptr);
    }
    if (err) {
        iouscope_bpf__destroy(s);
        errno = -err;
        return nullptr;
    }
    return s;
}

}  // namespace

void SkeletonDeleter::operator()(iouscope_bpf* s) const {
    iouscope_bpf__destroy(s);
}
void SkeletonDeleter::operator()(iouscope_deep_bpf* s) const {
    iouscope_deep_bpf__destroy(s);
}
void SkeletonDeleter::operator()(iouscope_nvme_bpf* s) const {
    iouscope_nvme_bpf__destroy(s);
}
void SkeletonDeleter::operator()(iouscope_gaps_bpf* s) const {
    iouscope_gaps_bpf__destroy(s);
}
void SkeletonDeleter::operator()(iouscope_req_bpf* s) const {
    iouscope_req_bpf__destroy(s);
}

bool BpfObjects::open(BpfObject id) {
    switch (id) {
        case BpfObject::core:
            core.reset(core_without_cast ? open_core_without_cast() : iouscope_bpf__open());
            return core != nullptr;
        case BpfObject::deep:
            deep.reset(iouscope_deep_bpf__open());
            return deep != nullptr;
        case BpfObject::nvme:
            nvme.reset(iouscope_nvme_bpf__open());
            return nvme != nullptr;
        case BpfObject::gaps:
            gaps.reset(iouscope_gaps_bpf__open());
            return gaps != nullptr;
        case BpfObject::req:
            req.reset(iouscope_req_bpf__open());
            return req != nullptr;
        case BpfObject::count:
            break;
    }
    errno = EINVAL;
    return false;
}

bpf_object* BpfObjects::object(BpfObject id) const {
    switch (id) {
        case BpfObject::core:
            return core ? core->obj : nullptr;
        case BpfObject::deep:
            return deep ? deep->obj : nullptr;
        case BpfObject::nvme:
            return nvme ? nvme->obj : nullptr;
        case BpfObject::gaps:
            return gaps ? gaps->obj : nullptr;
        case BpfObject::req:
            return req ? req->obj : nullptr;
        case BpfObject::count:
            break;
    }
    return nullptr;
}

namespace {

// Hands `follower` the owner's maps of the same name and its shared globals, before the
// follower loads. Both sides define them from the same bpf/*.bpf.h, so a map whose shape differs
// is a build error of ours, refused rather than left to count apart.
int share_maps(bpf_object* owner, bpf_object* follower) {
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, follower) {
        const char* name = bpf_map__name(map);
        if (bpf_map__is_internal(map) && std::strcmp(name, kSharedSection) != 0) continue;
        const bpf_map* own = bpf_object__find_map_by_name(owner, name);
        if (!own) continue;  // the follower's own map
        if (bpf_map__type(own) != bpf_map__type(map) ||
            bpf_map__key_size(own) != bpf_map__key_size(map) ||
            bpf_map__value_size(own) != bpf_map__value_size(map) ||
            bpf_map__max_entries(own) != bpf_map__max_entries(map))
            return -EINVAL;
        if (int err = bpf_map__reuse_fd(map, bpf_map__fd(own)); err) return err;
    }
    return 0;
}

}  // namespace

int BpfObjects::load() {
    if (!core) return -EINVAL;
    if (int err = iouscope_bpf__load(core.get()); err) return err;
    for (auto id : {BpfObject::deep, BpfObject::nvme, BpfObject::gaps, BpfObject::req}) {
        bpf_object* obj = object(id);
        if (!obj) continue;
        if (int err = share_maps(core->obj, obj); err) return err;
        int err = 0;
        if (id == BpfObject::deep) err = iouscope_deep_bpf__load(deep.get());
        if (id == BpfObject::nvme) err = iouscope_nvme_bpf__load(nvme.get());
        if (id == BpfObject::gaps) err = iouscope_gaps_bpf__load(gaps.get());
        if (id == BpfObject::req) err = iouscope_req_bpf__load(req.get());
        if (err) return err;
    }
    return 0;
}

int BpfObjects::map_fd(const char* name) const {
    for (std::size_t i = 0; i < kBpfObjects; ++i) {
        bpf_object* obj = object(static_cast<BpfObject>(i));
        if (!obj) continue;
        if (const bpf_map* m = bpf_object__find_map_by_name(obj, name)) return bpf_map__fd(m);
    }
    return -1;
}

}  // namespace iouscope
