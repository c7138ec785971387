// SPIR images (LLVM bitcode). The module is read lazily: declarations and linkage only, no
// function bodies. LLVM's bitcode symbol table (irsymtab) would give names and linkage too, but
// not the calling convention that tells a SPIR kernel from a function.
#include "image/readers.h"
#include "support/error.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <array>
#include <cstdlib>

namespace devdl::readers {

namespace {

// OpenCL C built-in functions (OpenCL C 3.0, section 6.15) appear in SPIR as declarations, like
// imports. SPIR-V has none of these: the translator turns them into instructions. Families that
// share a prefix are matched by it.
constexpr std::string_view kBuiltinPrefixes[] = {
    "async_work_group_", "atom_", "atomic_", "capture_event_", "commit_", "convert_",
    "enqueue_", "get_image_", "get_kernel_", "get_pipe_", "half_", "intel_", "native_",
    "read_image", "reserve_", "sub_group_", "vload", "vstore", "work_group_", "write_image",
};
constexpr auto kBuiltins = std::to_array<std::string_view>({
    "abs", "abs_diff", "acos", "acosh", "acospi", "add_sat", "all", "any", "asin", "asinh",
    "asinpi", "atan", "atan2", "atan2pi", "atanh", "atanpi", "barrier", "bitselect", "cbrt", "ceil",
    "clamp", "clz", "copysign", "cos", "cosh", "cospi", "create_user_event", "cross", "ctz",
    "degrees", "distance", "dot", "erf", "erfc", "exp", "exp10", "exp2", "expm1", "fabs",
    "fast_distance", "fast_length", "fast_normalize", "fdim", "floor", "fma", "fmax", "fmin",
    "fmod", "fract", "frexp", "get_default_queue", "get_enqueued_local_size",
    "get_enqueued_num_sub_groups", "get_fence", "get_global_id", "get_global_linear_id",
    "get_global_offset", "get_global_size", "get_group_id", "get_local_id", "get_local_linear_id",
    "get_local_size", "get_max_sub_group_size", "get_num_groups", "get_num_sub_groups",
    "get_sub_group_id", "get_sub_group_local_id", "get_sub_group_size", "get_work_dim", "hadd",
    "hypot", "ilogb", "is_valid_event", "is_valid_reserve_id", "isequal", "isfinite", "isgreater",
    "isgreaterequal", "isinf", "isless", "islessequal", "islessgreater", "isnan", "isnormal",
    "isnotequal", "isordered", "isunordered", "ldexp", "length", "lgamma", "lgamma_r", "log",
    "log10", "log1p", "log2", "logb", "mad", "mad24", "mad_hi", "mad_sat", "max", "maxmag",
    "mem_fence", "min", "minmag", "mix", "modf", "mul24", "mul_hi", "nan", "ndrange_1D",
    "ndrange_2D", "ndrange_3D", "nextafter", "normalize", "popcount", "pow", "pown", "powr",
    "prefetch", "printf", "radians", "read_mem_fence", "read_pipe", "release_event", "remainder",
    "remquo", "retain_event", "rhadd", "rint", "rootn", "rotate", "round", "rsqrt", "select",
    "set_user_event_status", "shuffle", "shuffle2", "sign", "signbit", "sin", "sincos", "sinh",
    "sinpi", "smoothstep", "sqrt", "step", "sub_sat", "tan", "tanh", "tanpi", "tgamma", "to_global",
    "to_local", "to_private", "trunc", "upsample", "wait_group_events", "write_mem_fence",
    "write_pipe",
});
static_assert(std::is_sorted(kBuiltins.begin(), kBuiltins.end()));

bool isOpenClBuiltin(llvm::StringRef name) {
  std::string base = name.str();
  if (name.startswith("_Z")) {
    llvm::ItaniumPartialDemangler demangler;
    if (demangler.partialDemangle(base.c_str())) return false;
    char *demangled = demangler.getFunctionBaseName(nullptr, nullptr);
    if (!demangled) return false;
    base = demangled;
    std::free(demangled);
  }
  if (std::binary_search(kBuiltins.begin(), kBuiltins.end(), std::string_view(base))) return true;
  return std::any_of(std::begin(kBuiltinPrefixes), std::end(kBuiltinPrefixes),
                     [&](std::string_view prefix) { return base.starts_with(prefix); });
}

}  // namespace

llvm::Error readBitcode(DeviceImage &image) {
  llvm::LLVMContext context;
  llvm::MemoryBufferRef ref(llvm::StringRef(asText(image.bytes)), "");
  auto module = llvm::getLazyBitcodeModule(ref, context);
  if (!module)
    return fail(ErrorCode::BadFormat, "invalid LLVM bitcode: " + llvm::toString(module.takeError()));
  llvm::Module &m = **module;
  image.triple = image.storage->save(m.getTargetTriple());

  // Names live in the module, which dies with this function: keep copies in storage.
  auto add = [&](llvm::StringRef name, SymbolKind kind) {
    image.symbols.push_back({image.storage->save(std::string_view(name.data(), name.size())), kind});
  };
  for (const llvm::Function &f : m.functions()) {
    if (f.isIntrinsic() || f.hasLocalLinkage()) continue;
    if (f.isDeclaration()) {
      if (isImportableName(std::string_view(f.getName().data(), f.getName().size())) &&
          !isOpenClBuiltin(f.getName()))
        add(f.getName(), SymbolKind::Import);
    } else {
      add(f.getName(), f.getCallingConv() == llvm::CallingConv::SPIR_KERNEL ? SymbolKind::Kernel
                                                                           : SymbolKind::Function);
    }
  }
  for (const llvm::GlobalVariable &g : m.globals()) {
    if (g.hasLocalLinkage() || g.getName().startswith("llvm.")) continue;
    if (g.isDeclaration()) {
      if (isImportableName(std::string_view(g.getName().data(), g.getName().size())))
        add(g.getName(), SymbolKind::Import);
    } else {
      add(g.getName(), SymbolKind::Variable);
    }
  }
  return llvm::Error::success();
}

}  // namespace devdl::readers
