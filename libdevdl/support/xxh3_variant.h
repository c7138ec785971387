/* One variant of XXH3 (see xxh3.h): the including file names it (DEVDL_XXH3_VARIANT) and its
 * vectors (XXH_VECTOR) and is compiled for them. C, and everything of xxHash static
 * (XXH_INLINE_ALL): no inline function shared with other files can be compiled here with
 * instructions the CPU may lack. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stddef.h>
#include <stdint.h>

#define DEVDL_XXH3_PASTE2(a, b) a##b
#define DEVDL_XXH3_PASTE(a, b) DEVDL_XXH3_PASTE2(a, b)
#define DEVDL_XXH3_NAME(f) DEVDL_XXH3_PASTE(DEVDL_XXH3_VARIANT, f)

void DEVDL_XXH3_NAME(_hash128)(const void *data, size_t size, uint64_t out[2]);
uint64_t DEVDL_XXH3_NAME(_hash64)(const void *const *pieces, const size_t *sizes, size_t count);

void DEVDL_XXH3_NAME(_hash128)(const void *data, size_t size, uint64_t out[2]) {
  const XXH128_hash_t hash = XXH3_128bits(data, size);
  out[0] = hash.low64;
  out[1] = hash.high64;
}

uint64_t DEVDL_XXH3_NAME(_hash64)(const void *const *pieces, const size_t *sizes, size_t count) {
  if (count == 1) return XXH3_64bits(pieces[0], sizes[0]);
  XXH3_state_t state; /* aligned as its type says; no allocation */
  XXH3_64bits_reset(&state);
  for (size_t i = 0; i < count; ++i) XXH3_64bits_update(&state, pieces[i], sizes[i]);
  return XXH3_64bits_digest(&state);
}
