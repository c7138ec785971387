// xxHash's XXH3 at the widest vectors the CPU has. Debian's libxxhash.so picks AVX2 or AVX-512
// at run time behind its *_dispatch entry points (7x the default SSE2 code on an 800 KB image
// here); its static archive, which the portable build links, has no dispatcher, so that build
// keeps the SSE2 code.
#pragma once

#if DEVDL_XXH_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_* become their *_dispatch versions
#else
#include <xxhash.h>
#endif
