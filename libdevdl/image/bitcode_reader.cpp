// SPIR images (LLVM bitcode). The symbols come from the module's global value records and the
// bitcode string table, read with LLVM's bitstream cursor: no IR is built. LLVM's IR reader is not
// safe on hostile input (it crashes on fuzzed metadata), and the prebuilt symbol table (irsymtab)
// does not tell a SPIR kernel (calling convention SPIR_KERNEL) from a function.
#include "image/readers.h"
#include "support/demangle.h"
#include "support/error.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/LLVMBitCodes.h>
#include <llvm/Bitstream/BitstreamReader.h>
#include <llvm/IR/CallingConv.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

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
  const std::string base = mangledBaseName(name).value_or(name.str());
  if (std::binary_search(kBuiltins.begin(), kBuiltins.end(), std::string_view(base))) return true;
  return std::any_of(std::begin(kBuiltinPrefixes), std::end(kBuiltinPrefixes),
                     [&](std::string_view prefix) { return base.starts_with(prefix); });
}

}  // namespace

namespace {

// A global value record: where its name is in the string table, and what it is.
struct GlobalRecord {
  uint64_t nameOffset, nameSize;
  SymbolKind kind;  // Kernel, Function, Variable, or Import for declarations
  bool isStatic = false;  // a writable variable of local linkage in global memory (kind Variable)
};

// Linkage codes of the bitcode format (LLVM's getDecodedLinkage): internal and the private kinds.
bool isLocalLinkage(uint64_t code) { return code == 3 || code == 9 || code == 13 || code == 14; }

llvm::Error bad(const llvm::Twine &what) { return fail(ErrorCode::BadFormat, "invalid LLVM bitcode: " + what); }
llvm::Error bad(llvm::Error err) { return bad(llvm::toString(std::move(err))); }

class BitcodeScanner {
 public:
  explicit BitcodeScanner(llvm::ArrayRef<uint8_t> bytes) : stream_(bytes) {}

  llvm::Error scan() {
    if (llvm::Error err = stream_.JumpToBit(32)) return bad(std::move(err));  // past the magic
    // Top-level blocks, 32-bit aligned; producers may leave padding after the last one.
    while (stream_.getCurrentByteNo() + 4 <= stream_.getBitcodeBytes().size()) {
      auto entry = stream_.advance();
      if (!entry) return bad(entry.takeError());
      if (entry->Kind != llvm::BitstreamEntry::SubBlock) return bad("expected a block at the top level");
      llvm::Error err = llvm::Error::success();
      if (entry->ID == llvm::bitc::MODULE_BLOCK_ID && !sawModule_) err = readModule();
      else if (entry->ID == llvm::bitc::STRTAB_BLOCK_ID && sawModule_ && !sawStrtab_) err = readStrtab();
      else if (entry->ID == llvm::bitc::BLOCKINFO_BLOCK_ID) err = readBlockInfo();
      else err = stream_.SkipBlock();
      if (err) return bad(std::move(err));
      if (sawModule_ && sawStrtab_) break;
    }
    if (!sawModule_) return bad("no module");
    if (version_ < 2) return bad("no string table (bitcode older than LLVM 5 is not supported)");
    return llvm::Error::success();
  }

  std::string_view triple() const { return triple_; }
  const std::vector<GlobalRecord> &globals() const { return globals_; }
  /// The name of a record, or nullopt when it is not inside the string table.
  std::optional<std::string_view> name(const GlobalRecord &g) const {
    if (g.nameOffset > strtab_.size() || g.nameSize > strtab_.size() - g.nameOffset) return std::nullopt;
    return std::string_view(strtab_.data() + g.nameOffset, g.nameSize);
  }

 private:
  llvm::Error readBlockInfo() {
    auto info = stream_.ReadBlockInfoBlock();
    if (!info) return info.takeError();
    if (!*info) return fail(ErrorCode::BadFormat, "malformed block info");
    blockInfo_ = std::move(**info);
    stream_.setBlockInfo(&blockInfo_);
    return llvm::Error::success();
  }

  llvm::Error readModule() {
    sawModule_ = true;
    if (llvm::Error err = stream_.EnterSubBlock(llvm::bitc::MODULE_BLOCK_ID)) return err;
    llvm::SmallVector<uint64_t, 64> record;
    while (true) {
      auto entry = stream_.advance();
      if (!entry) return entry.takeError();
      switch (entry->Kind) {
        case llvm::BitstreamEntry::Error: return fail(ErrorCode::BadFormat, "malformed module block");
        case llvm::BitstreamEntry::EndBlock: return llvm::Error::success();
        case llvm::BitstreamEntry::SubBlock:  // function bodies, constants, metadata: not needed
          if (llvm::Error err = entry->ID == llvm::bitc::BLOCKINFO_BLOCK_ID ? readBlockInfo() : stream_.SkipBlock())
            return err;
          continue;
        case llvm::BitstreamEntry::Record: break;
      }
      record.clear();
      auto code = stream_.readRecord(entry->ID, record);
      if (!code) return code.takeError();
      if (*code == llvm::bitc::MODULE_CODE_VERSION && !record.empty()) {
        version_ = record[0];
      } else if (*code == llvm::bitc::MODULE_CODE_TRIPLE) {
        triple_.clear();
        for (uint64_t c : record) triple_ += static_cast<char>(c);
      } else if (*code == llvm::bitc::MODULE_CODE_FUNCTION && record.size() >= 6) {
        // [strtab offset, strtab size, type, calling convention, isproto, linkage, ...]
        if (isLocalLinkage(record[5])) continue;
        const SymbolKind kind = record[4] ? SymbolKind::Import
                                : record[3] == llvm::CallingConv::SPIR_KERNEL ? SymbolKind::Kernel
                                                                              : SymbolKind::Function;
        globals_.push_back({record[0], record[1], kind});
      } else if (*code == llvm::bitc::MODULE_CODE_GLOBALVAR && record.size() >= 6) {
        // [strtab offset, strtab size, type, isconst | explicit type << 1 | address space << 2,
        //  initid (0: declaration), linkage, ...]
        if (isLocalLinkage(record[5])) {
          const bool global = (record[3] & 2) && (record[3] >> 2) == 1;  // SPIR's global address space
          if (global && !(record[3] & 1) && record[4]) globals_.push_back({record[0], record[1], SymbolKind::Variable, true});
          continue;
        }
        globals_.push_back({record[0], record[1], record[4] ? SymbolKind::Variable : SymbolKind::Import});
      }
    }
  }

  llvm::Error readStrtab() {
    sawStrtab_ = true;
    if (llvm::Error err = stream_.EnterSubBlock(llvm::bitc::STRTAB_BLOCK_ID)) return err;
    llvm::SmallVector<uint64_t, 1> record;
    while (true) {
      auto entry = stream_.advance();
      if (!entry) return entry.takeError();
      if (entry->Kind == llvm::BitstreamEntry::EndBlock) return llvm::Error::success();
      if (entry->Kind == llvm::BitstreamEntry::SubBlock) {
        if (llvm::Error err = stream_.SkipBlock()) return err;
        continue;
      }
      if (entry->Kind != llvm::BitstreamEntry::Record) return fail(ErrorCode::BadFormat, "malformed string table");
      llvm::StringRef blob;
      record.clear();
      auto code = stream_.readRecord(entry->ID, record, &blob);
      if (!code) return code.takeError();
      if (*code == llvm::bitc::STRTAB_BLOB) strtab_ = std::string_view(blob.data(), blob.size());
    }
  }

  llvm::BitstreamCursor stream_;
  llvm::BitstreamBlockInfo blockInfo_;
  bool sawModule_ = false, sawStrtab_ = false;
  uint64_t version_ = 0;
  std::string triple_;
  std::vector<GlobalRecord> globals_;
  std::string_view strtab_;  // a view into the image
};

}  // namespace

llvm::Error readBitcode(DeviceImage &image) {
  // LLVM's magic checks read four bytes without looking at the end.
  const unsigned char *begin = image.bytes.data(), *end = begin + image.bytes.size();
  if (end - begin < 4) return bad("truncated header");
  if (llvm::isBitcodeWrapper(begin, end) && llvm::SkipBitcodeWrapperHeader(begin, end, /*VerifyBufferSize=*/true))
    return bad("truncated or inconsistent wrapper header");
  if (end - begin < 4 || !llvm::isRawBitcode(begin, end)) return bad("bad magic");
  BitcodeScanner scanner(llvm::ArrayRef<uint8_t>(begin, end));
  if (llvm::Error err = scanner.scan()) return err;
  image.triple = image.storage->save(scanner.triple());
  for (const GlobalRecord &g : scanner.globals()) {
    auto name = scanner.name(g);
    if (!name) return bad("symbol name outside the string table");
    if (name->starts_with("llvm.")) continue;  // intrinsics and llvm.used-style arrays
    if (g.isStatic) {
      image.statics.push_back(*name);
    } else if (g.kind != SymbolKind::Import) {
      image.symbols.push_back({*name, g.kind});
    } else if (!isOpenClBuiltin(llvm::StringRef(name->data(), name->size()))) {
      if (auto import = spirImport(*name)) image.symbols.push_back(*import);
    }
  }
  return llvm::Error::success();
}

}  // namespace devdl::readers
