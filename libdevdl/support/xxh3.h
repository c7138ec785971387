// XXH3 (xxHash) at the widest vectors an x86-64 CPU has. xxHash's own code is compiled once for
// each of SSE2, AVX2 and AVX-512 (xxh3_*.c) and the first call picks the widest the CPU and the
// kernel support: one mechanism in every build, where Debian's static libxxhash has no
// dispatcher at all (AVX2 and AVX-512 hash an 800 KB image 6x faster than SSE2 here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace devdl::xxh3 {

struct Hash128 {
  uint64_t low, high;
};

/// XXH3-128 of `size` bytes.
Hash128 hash128(const void *data, size_t size);
/// XXH3-64 of `size` bytes.
uint64_t hash64(const void *data, size_t size);
/// XXH3-64 of the pieces one after another (at most 8): the hash of their concatenation,
/// without making it.
uint64_t hash64(std::initializer_list<std::string_view> pieces);

/// The code chosen: "sse2", "avx2" or "avx512".
std::string_view variant();

namespace detail {

/// One compiled variant (C linkage, plain types: xxh3_variant.h).
struct Variant {
  const char *name;
  void (*hash128)(const void *data, size_t size, uint64_t out[2]);
  uint64_t (*hash64)(const void *const *pieces, const size_t *sizes, size_t count);
};

/// The variants this CPU can run, widest first (tests compare each with the reference).
std::span<const Variant> supportedVariants();

}  // namespace detail

}  // namespace devdl::xxh3
