/* XXH3 with SSE2 vectors (see xxh3.h); built with the matching -m option. */
#define XXH_VECTOR XXH_SSE2
#define DEVDL_XXH3_VARIANT devdl_xxh3_sse2
#include "support/xxh3_variant.h"
