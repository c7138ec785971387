// A CUDA program as it is written, kernel<<<>>> and cudaMemcpyFromSymbol, whose device code spans
// shared libraries: libcudamath (a device function, a table), libcudauser (kernels calling it), and
// a plugin opened with dlopen whose kernels call both and add to the table. devdl links each at
// load time (devdl_cuda_link_at_load). Checks every result against the host's own arithmetic, and
// that devdl's own API (device_dlsym, device_dladdr) sees the instances the runtime reaches.
//
//   cuda-runtime [--global] [--reopen N] [--broken BROKEN.so] PLUGIN.so
//
// --global opens the plugin RTLD_GLOBAL (else RTLD_LOCAL); --reopen closes and opens it N times
// more, checking each time; --broken opens a plugin whose code cannot link and checks that the
// rest goes on. Under LD_PRELOAD=libcudapatch.so, mathf is the preloaded one (set
// CUDA_RUNTIME_SAMPLE_PATCHED=1 to expect it).
#include "cudamath.h"
#include "cudauser.h"

#include <devdl.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

bool patched() { return std::getenv("CUDA_RUNTIME_SAMPLE_PATCHED") != nullptr; }
int mathOnHost(int x) { return patched() ? x + 100 : 3 * x + 1; }

int failures = 0;
bool quiet = false;  // while the plugin is opened again and again: failures alone

void expect(bool ok, const std::string &what) {
  if (!ok) ++failures;
  if (!ok || !quiet) std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
}

bool ran(int err, const char *what) {
  if (err) {
    std::printf("FAILED: %s: %s\n", what, cudaGetErrorString(static_cast<cudaError_t>(err)));
    ++failures;
  }
  return err == 0;
}

// The table as cudaMemcpyFromSymbol reads it: i * i + `added` each.
void expectTable(int added, const char *when) {
  int host[64];
  if (!ran(cudaMemcpyFromSymbol(host, table, sizeof host), "cudaMemcpyFromSymbol(table)")) return;
  bool same = true;
  for (int i = 0; i < 64; ++i) same &= host[i] == i * i + added;
  expect(same, std::string("the table read by cudaMemcpyFromSymbol ") + when);
}

void expectUser(int added, const char *when) {
  int out[64];
  if (!ran(user_run(out), "libcudauser's kernel")) return;
  bool same = true;
  for (int i = 0; i < 64; ++i) same &= out[i] == 2 * (i * i + added) + mathOnHost(i);
  expect(same, std::string("libcudauser's kernel ") + when);
}

// devdl's own API sees what the runtime sees: the global scope's `table` is the instance
// cudaGetSymbolAddress gives, device_dladdr names it, and its kernels are there.
void expectDevdlSeesTheSame() {
  void *fromRuntime = nullptr;
  if (!ran(cudaGetSymbolAddress(&fromRuntime, table), "cudaGetSymbolAddress(table)")) return;
  void *global = device_dlopen(nullptr, DEVDL_LAZY);
  void *fromDevdl = global ? device_dlsym(global, "table") : nullptr;
  expect(fromDevdl == fromRuntime, "device_dlsym of the global scope gives the table the runtime gives");
  devdl_addr_info info = {};
  info.size = sizeof info;
  const bool named = device_dladdr(static_cast<char *>(fromRuntime) + 8, &info) != 0;
  expect(named && std::strcmp(info.symbol, "table") == 0 && info.offset == 8, "device_dladdr names it");
  expect(global && device_dlsym(global, "_Z10fill_tablev") != nullptr,
         "device_dlsym of the global scope gives libcudamath's kernel");
}

// Opens the plugin, runs its kernels, adds to the table through it; the table's additions so far.
int usePlugin(const char *path, int mode, int added) {
  void *plugin = dlopen(path, mode | RTLD_NOW);
  if (!plugin) {
    expect(false, std::string("dlopen: ") + dlerror());
    return added;
  }
  using Run = int (*)(int *);
  using Add = int (*)();
  auto run = reinterpret_cast<Run>(dlsym(plugin, "plugin_run"));
  auto add = reinterpret_cast<Add>(dlsym(plugin, "plugin_add_to_table"));
  int out[64];
  if (run && ran(run(out), "the plugin's kernel")) {
    bool same = true;
    for (int i = 0; i < 64; ++i) same &= out[i] == mathOnHost(i * i + added) + 2 * i;
    expect(same, "the plugin's kernel calls libcudamath's and libcudauser's functions");
  }
  if (add && ran(add(), "the plugin's kernel adding to the table")) added += 1000;
  dlclose(plugin);
  // Its constructors registered it; its destructors unregistered it as it went.
  if (void *again = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)) {
    expect(false, "dlclose unloaded the plugin");
    dlclose(again);
  }
  return added;
}

// Device memory in use, and the process's resident memory, in bytes.
size_t deviceMemoryUsed() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return total - free;
}
size_t residentMemory() {
  long pages = 0, resident = 0;
  if (FILE *statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return static_cast<size_t>(resident) * 4096;
}

}  // namespace

int main(int argc, char **argv) {
  int mode = RTLD_LOCAL, reopen = 0;
  const char *plugin = nullptr, *broken = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--global")) mode = RTLD_GLOBAL;
    else if (!std::strcmp(argv[i], "--reopen") && i + 1 < argc) reopen = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--broken") && i + 1 < argc) broken = argv[++i];
    else plugin = argv[i];
  }
  if (!plugin) {
    std::fprintf(stderr, "usage: %s [--global] [--reopen N] [--broken BROKEN.so] PLUGIN.so\n", argv[0]);
    return 2;
  }
  if (!ran(math_fill(), "libcudamath's kernel")) return 1;
  expectTable(0, "after libcudamath's kernel filled it");
  expectUser(0, "reads the table and calls libcudamath's function");
  expectDevdlSeesTheSame();
  int added = usePlugin(plugin, mode, 0);
  expectTable(added, "after the plugin's kernel added to it");
  expectUser(added, "sees what the plugin's kernel added");
  if (reopen) {
    // What a plugin's load and unload keep, measured after the first few (allocators settle).
    quiet = true;
    for (int i = 0; i < 3; ++i) added = usePlugin(plugin, mode, added);
    const size_t device = deviceMemoryUsed(), host = residentMemory();
    quiet = true;
    for (int i = 0; i < reopen; ++i) added = usePlugin(plugin, mode, added);
    quiet = false;
    const long deviceGrew = static_cast<long>(deviceMemoryUsed()) - static_cast<long>(device);
    const long hostGrew = static_cast<long>(residentMemory()) - static_cast<long>(host);
    expectTable(added, ("after the plugin was opened and closed " + std::to_string(reopen + 3) + " times more").c_str());
    // Less than a kilobyte a load: what one load keeps (its program, its module) is far more.
    expect(deviceGrew < reopen * 1024L && hostGrew < reopen * 1024L,
           "memory after " + std::to_string(reopen) + " loads: device " + std::to_string(deviceGrew) + " bytes, host " +
               std::to_string(hostGrew) + " bytes more");
  }
  if (broken) {
    // Its link fails as it loads (said on stderr); its kernel fails to launch; the rest goes on.
    if (void *handle = dlopen(broken, RTLD_NOW | RTLD_LOCAL)) {
      auto run = reinterpret_cast<int (*)()>(dlsym(handle, "broken_run"));
      const int err = run ? run() : -1;
      expect(err != 0, std::string("the broken plugin's kernel does not launch (") +
                           (err > 0 ? cudaGetErrorName(static_cast<cudaError_t>(err)) : "no broken_run") + ")");
      dlclose(handle);
    } else {
      expect(false, std::string("dlopen of the broken plugin: ") + dlerror());
    }
    expectUser(added, "still runs after the broken plugin");
  }
  std::printf("%s\n", failures ? "FAILED" : "all right");
  return failures ? 1 : 0;
}
