#include "backend/cuda/toolkit.h"
#include "bundle/host_elf.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/regular_file.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/MemoryBuffer.h>

#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace devdl::backend::cuda {

std::vector<std::string> toolkitLibraryDirectories() {
  std::vector<std::string> directories;
  if (const char *paths = secureExecution() ? nullptr : std::getenv("LD_LIBRARY_PATH")) {
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(paths).split(parts, ':', -1, false);
    for (llvm::StringRef part : parts) directories.push_back(part.str());
  }
  if (const char *home = secureExecution() ? nullptr : std::getenv("CUDA_HOME"); home && *home)
    directories.push_back(std::string(home) + "/lib64");
  for (const char *dir : {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64"})
    directories.push_back(dir);
  return directories;
}

std::optional<std::string> fileIdentity(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  const long long mtime = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(mtime);
}

namespace {

constexpr const char *kDeviceRuntime = "libcudadevrt.a";

std::optional<DeviceRuntimeFile> deviceRuntimeAt(const std::string &path) {
  auto identity = fileIdentity(path);
  if (!identity) return std::nullopt;
  return DeviceRuntimeFile{path, "libcudadevrt " + *identity};
}

// The device code in the archive's members: the first __nv_relfatbin section found.
llvm::Expected<Bytes> relocatableCodeOf(Bytes archive) {
  auto members = bundle::archiveMembers(archive);
  if (!members) return members.takeError();
  for (const bundle::ArchiveMember &member : *members) {
    if (!bundle::isElf(member.bytes)) continue;
    auto sections = bundle::findRelocatableFatbinSectionsInElf(member.bytes);
    if (!sections) return sections.takeError();
    if (!sections->empty()) return sections->front();
  }
  return fail(ErrorCode::BadFormat, "no member holds relocatable device code (an __nv_relfatbin section)");
}

}  // namespace

std::optional<DeviceRuntimeFile> findDeviceRuntime() {
  if (const char *named = devdlVariable("DEVDL_CUDADEVRT"); named && *named) return deviceRuntimeAt(named);
  for (const std::string &dir : toolkitLibraryDirectories())
    if (auto file = deviceRuntimeAt(dir + "/" + kDeviceRuntime)) return file;
  return std::nullopt;
}

std::string deviceRuntimeSearch() {
  if (const char *named = devdlVariable("DEVDL_CUDADEVRT"); named && *named)
    return std::string("DEVDL_CUDADEVRT=") + named + ", which is no regular file";
  std::string where;
  for (const std::string &dir : toolkitLibraryDirectories()) where += (where.empty() ? "" : ", ") + dir;
  return std::string(kDeviceRuntime) + " is in none of " + where + " (DEVDL_CUDADEVRT names it)";
}

llvm::Expected<Bytes> deviceRuntimeCode(const DeviceRuntimeFile &file) {
  struct Read {
    std::unique_ptr<llvm::MemoryBuffer> buffer;
    Bytes code;
    std::string error;
  };
  static std::mutex mutex;
  static std::map<std::string, Read> read;  // by identity: a file changed is read again
  std::lock_guard lock(mutex);
  auto [it, first] = read.try_emplace(file.identity);
  Read &entry = it->second;
  if (first) {
    auto opened = RegularFile::open(file.path);
    auto buffer = opened ? opened->read() : opened.takeError();
    auto code = buffer ? relocatableCodeOf(asBytes(std::string_view((*buffer)->getBufferStart(), (*buffer)->getBufferSize())))
                       : buffer.takeError();
    if (code) {
      entry.buffer = std::move(*buffer);
      entry.code = *code;
    } else {
      entry.error = llvm::toString(code.takeError());
    }
  }
  if (!entry.error.empty())
    return fail(ErrorCode::BadFormat, file.path + ": the CUDA device runtime cannot be read: " + entry.error);
  return entry.code;
}

llvm::Expected<std::optional<Bytes>> deviceRuntimeFor(std::span<const LinkInput> inputs,
                                                      const std::optional<DeviceRuntimeFile> &runtime) {
  for (const LinkInput &input : inputs)
    for (const Symbol &s : input.image->symbols) {
      if (s.kind != SymbolKind::Import || !s.weak || cudaProviderOf(s.name) != CudaProvider::DeviceRuntime) continue;
      if (!runtime)
        return fail(ErrorCode::Unresolved,
                    input.label + ": undefined device symbol `" + std::string(s.name) +
                        "`: it is the CUDA device runtime's (dynamic parallelism, the device-side runtime API), "
                        "which devdl links from the toolkit, as nvcc -dlink does, but " + deviceRuntimeSearch());
      auto code = deviceRuntimeCode(*runtime);
      if (!code) return code.takeError();
      if (Debug::get().on(Debug::Libs))
        Debug::get().print(input.label + " uses the CUDA device runtime (`" + std::string(s.name) + "`): " +
                           runtime->path + " linked in");
      return std::optional<Bytes>(*code);
    }
  return std::optional<Bytes>();
}

}  // namespace devdl::backend::cuda
