#include "support/xxh3.h"

#include <cassert>

extern "C" {
#define DEVDL_XXH3_DECLARE(v)                                                 \
  void devdl_xxh3_##v##_hash128(const void *data, size_t size, uint64_t out[2]); \
  uint64_t devdl_xxh3_##v##_hash64(const void *const *pieces, const size_t *sizes, size_t count);
DEVDL_XXH3_DECLARE(sse2)
DEVDL_XXH3_DECLARE(avx2)
DEVDL_XXH3_DECLARE(avx512)
#undef DEVDL_XXH3_DECLARE
}

namespace devdl::xxh3 {

namespace detail {

namespace {

// Widest first; SSE2 is x86-64's baseline.
constexpr Variant kVariants[] = {
    {"avx512", devdl_xxh3_avx512_hash128, devdl_xxh3_avx512_hash64},
    {"avx2", devdl_xxh3_avx2_hash128, devdl_xxh3_avx2_hash64},
    {"sse2", devdl_xxh3_sse2_hash128, devdl_xxh3_sse2_hash64},
};

// __builtin_cpu_supports also asks the kernel (XGETBV) whether it saves the vector registers.
bool hasAvx512() { return __builtin_cpu_init(), __builtin_cpu_supports("avx512f"); }
bool hasAvx2() { return __builtin_cpu_init(), __builtin_cpu_supports("avx2"); }

}  // namespace

std::span<const Variant> supportedVariants() {
  return std::span(kVariants).subspan(hasAvx512() ? 0 : hasAvx2() ? 1 : 2);
}

}  // namespace detail

namespace {

const detail::Variant &chosen() {
  static const detail::Variant &variant = detail::supportedVariants().front();
  return variant;
}

}  // namespace

Hash128 hash128(const void *data, size_t size) {
  uint64_t out[2];
  chosen().hash128(data, size, out);
  return {out[0], out[1]};
}

uint64_t hash64(const void *data, size_t size) { return chosen().hash64(&data, &size, 1); }

uint64_t hash64(std::initializer_list<std::string_view> pieces) {
  constexpr size_t kMost = 8;
  const void *data[kMost];
  size_t sizes[kMost], count = 0;
  assert(pieces.size() <= kMost);
  for (std::string_view piece : pieces) {
    data[count] = piece.data();
    sizes[count++] = piece.size();
  }
  return chosen().hash64(data, sizes, count);
}

std::string_view variant() { return chosen().name; }

}  // namespace devdl::xxh3
