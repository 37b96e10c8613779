#pragma once
// std::allocator whose default construction leaves a trivial element unwritten, for a buffer a
// read() fills: vector::resize() then grows it without zeroing what the read overwrites.
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace iouscope {

template <typename T>
struct UninitAllocator : std::allocator<T> {
    static_assert(std::is_trivially_default_constructible_v<T>);
    template <typename U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <typename U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;  // default-initialised: left as it was
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

}  // namespace iouscope
