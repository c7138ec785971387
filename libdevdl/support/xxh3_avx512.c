/* XXH3 with AVX512 vectors (see xxh3.h); built with the matching -m option. */
#define XXH_VECTOR XXH_AVX512
#define DEVDL_XXH3_VARIANT devdl_xxh3_avx512
#include "support/xxh3_variant.h"
