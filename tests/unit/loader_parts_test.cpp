// The loader's parts on their own, over the fake backend (unit/fake_backend.h), made as the
// Loader makes them: what an open adds and how a failed one is taken back (Handles::Open),
// whether the device takes each image (Candidacies), a program planned after a scan of the
// process and found again in memory (Programs), DEVDL_PRELOAD applied (ProcessScan), a name bound
// through what a handle's images import (Lookups), a program a runtime loads (Programs), and a
// local host library's images resolved in what it needs (ProcessScan).
#include "image/instance_cells.h"
#include "loader/files.h"
#include "loader/handles.h"
#include "loader/lookups.h"
#include "loader/process_scan.h"
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <dlfcn.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace devdl::test {
namespace {

class LoaderParts : public ::testing::Test {
 protected:
  LoaderParts()
      : devices_(fake::backends(), ""),
        places_(devices_),
        candidacies_(images_, devices_, places_),
        globalScope_(images_, scopes_, candidacies_),
        programs_({images_, scopes_, places_, devices_, mutex_, [this](LoaderLock &) { ++scans_; }},
                  noStore, std::chrono::seconds(1)),
        handles_(images_, scopes_, globalScope_, candidacies_, programs_),
        reader_(candidacies_, nullptr),
        scan_(images_, scopes_, globalScope_, handles_, candidacies_, reader_),
        lookups_({images_, scopes_, handles_, candidacies_, programs_, places_, scan_}) {
    std::lock_guard lock(fake::linksMutex());
    fake::links().clear();
  }

  /// The file at `path`, and the files its images need, as an open reads them.
  std::vector<OpenedFile> read(const std::string &path) {
    auto file = openNamedFile(path.c_str());
    EXPECT_TRUE(!!file) << errorText(file);
    auto first = reader_.readOpened(std::move(*file), handles_.identities(), /*mayOpenDevice=*/true);
    EXPECT_TRUE(!!first) << errorText(first);
    auto files = reader_.readNeeded(std::move(*first), handles_.identities(), /*mayOpenDevice=*/true);
    EXPECT_TRUE(!!files) << errorText(files);
    return std::move(*files);
  }
  /// The handle an open of `path` with `flags` adds, what it did in `record`.
  Handle *add(const std::string &path, int flags, OpenRecord &record) {
    std::vector<OpenedFile> files = read(path);
    auto added = handles_.add(files, flags, record);
    EXPECT_TRUE(added && added->settled()) << errorText(added);
    return added && added->settled() ? **added : nullptr;
  }
  /// The seed's library opened global, then its application: their handles.
  std::pair<Handle *, Handle *> openSeed() {
    OpenRecord libOpen, appOpen;
    Handle *lib = add(image("lib.spv"), DEVDL_LAZY | DEVDL_GLOBAL, libOpen);
    return {lib, add(image("app.spv"), DEVDL_LAZY, appOpen)};
  }
  bool loaded(uint32_t id) const { return images_.contains(id) && images_[id].loaded; }
  /// After a scan: the inputs of the one link a runtime's registration of the host library
  /// `file`'s image makes, the library opened RTLD_LOCAL (its image out of the global scope).
  std::vector<std::string> linkedForRuntime(const std::string &file) {
    LoaderLock lock(mutex_);
    scan_.scan(lock);
    std::vector<uint32_t> roots;
    for (uint32_t id = 0; id < images_.end(); ++id)
      if (loaded(id) && images_[id].file == file) roots.push_back(id);
    EXPECT_EQ(roots.size(), 1u) << file;
    if (roots.size() != 1) return {};
    EXPECT_FALSE(scopes_.isGlobal(roots.front())) << file << " was opened RTLD_LOCAL";
    backend::RuntimeLoad runtime{[](std::string_view, const char *) -> llvm::Expected<void *> {
      static int module;
      return &module;
    }};
    auto program = programs_.programForRuntime(lock, roots, file, runtime);
    EXPECT_TRUE(!!program) << errorText(program);
    if (!program) return {};
    std::lock_guard links(fake::linksMutex());
    EXPECT_EQ(fake::links().size(), 1u);
    return fake::links().size() == 1 ? fake::links().front().inputs : std::vector<std::string>{};
  }
  static store::BinaryStore &noStore() {
    static store::DiskCache none("", 0);
    return none;
  }
  static size_t links() {
    std::lock_guard lock(fake::linksMutex());
    return fake::links().size();
  }

  LoaderMutex mutex_;
  ImageTable images_;
  Scopes scopes_;
  backend::Devices devices_;
  Places places_;
  Candidacies candidacies_;
  GlobalScope globalScope_;
  int scans_ = 0;
  Programs programs_;
  Handles handles_;
  FileReader reader_;
  ProcessScan scan_;
  Lookups lookups_;
};

// An open not kept (Handles::Open) takes back what it added and nothing else.
TEST_F(LoaderParts, AnOpenNotKeptTakesBackWhatItAddedAndNothingElse) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "lib.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/lib.devdl", image("lib.spv"), "");
  std::optional<Handles::Open> first(std::in_place, handles_);
  Handle *lib = add(dir + "/lib.devdl", DEVDL_LAZY, first->record());
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(first->record().referenced, lib);
  EXPECT_EQ(first->record().added, std::vector<Handle *>{lib});
  std::optional<Handles::Open> second(std::in_place, handles_);
  Handle *app = add(dir + "/app.devdl", DEVDL_LAZY | DEVDL_GLOBAL, second->record());
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(second->record().added, std::vector<Handle *>{app}) << "lib.devdl was open: its handle is taken";
  EXPECT_EQ(second->record().promoted, (std::vector<Handle *>{app, lib}));
  EXPECT_EQ(lib->references, 2u) << "its own, and app.devdl's";
  const uint32_t appImage = app->images.front();
  EXPECT_EQ(scopes_.globalOrder().size(), 2u);

  second.reset();
  EXPECT_EQ(handles_.find(app), nullptr);
  EXPECT_FALSE(loaded(appImage));
  ASSERT_EQ(handles_.find(lib), lib);
  EXPECT_EQ(lib->references, 1u);
  EXPECT_FALSE(lib->global) << "promoted by the open taken back";
  EXPECT_TRUE(scopes_.globalOrder().empty());
  first.reset();
  EXPECT_TRUE(handles_.all().empty());
}

// One kept stays, and its handle goes with its last reference.
TEST_F(LoaderParts, AnOpenKeptStays) {
  {
    Handles::Open open(handles_);
    ASSERT_NE(add(image("lib.spv"), DEVDL_LAZY | DEVDL_GLOBAL, open.record()), nullptr);
    open.keep();
  }
  ASSERT_EQ(handles_.all().size(), 1u);
  Handle &lib = *handles_.all().front();
  EXPECT_TRUE(lib.global);
  EXPECT_EQ(lib.references, 1u);
  handles_.dropReference(lib);
  EXPECT_TRUE(handles_.all().empty());
}

TEST_F(LoaderParts, AnOpenThatFailsOnAModuleLeavesWhatItAddedInItsRecord) {
  // app-depends records that it needs module seedlib, which no loaded image is.
  std::optional<Handles::Open> open(std::in_place, handles_);
  std::vector<OpenedFile> files = read(image("app-depends.spv.devdl"));
  auto added = handles_.add(files, DEVDL_LAZY | DEVDL_NODELETE, open->record());
  EXPECT_EQ(errorText(added), image("app-depends.spv.devdl") +
                                  ": image 0 (spirv): depends on module `seedlib`, which no loaded image is");
  ASSERT_EQ(open->record().added.size(), 1u);
  EXPECT_TRUE(open->record().added.front()->nodelete);
  open.reset();
  EXPECT_TRUE(handles_.all().empty()) << "NODELETE or not";
  EXPECT_EQ(images_.end(), 1u);
  EXPECT_FALSE(loaded(0));
}

TEST_F(LoaderParts, AnImageIsDecidedWhereDecidingOpensNoDeviceElseLater) {
  auto file = openNamedFile(image("lib.bc").c_str());
  ASSERT_TRUE(!!file);
  auto read = reader_.readFile(std::make_shared<const RegularFile>(std::move(*file)));
  ASSERT_TRUE(!!read);
  // No device open yet: a scan of the host's objects leaves it undecided.
  std::vector<NewImage> images = reader_.accept(std::move(*read), /*mayOpenDevice=*/false);
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].acceptance.candidacy, Candidacy::Undecided);
  const uint32_t id = images_.add(std::move(images[0].image), "lib.bc", 0, nullptr, nullptr);
  candidacies_.arrived(id, std::move(images[0].acceptance));
  EXPECT_TRUE(candidacies_.undecided(id));
  LoaderLock lock(mutex_);
  candidacies_.decide(lock);
  EXPECT_EQ(images_[id].acceptance.candidacy, Candidacy::Refused);
  EXPECT_EQ(images_[id].acceptance.whyNot, "the fake device takes SPIR-V only");
}

TEST_F(LoaderParts, AProgramIsPlannedAfterAScanAndThenFoundInMemory) {
  auto [lib, app] = openSeed();
  ASSERT_TRUE(lib && app);
  LoaderLock lock(mutex_);
  auto program = programs_.programFor(lock, app->images.front(), 0);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(scans_, 1) << "the process is scanned before the plan is made";
  EXPECT_EQ(links(), 1u);
  auto again = programs_.programFor(lock, app->images.front(), 0);
  ASSERT_TRUE(!!again);
  EXPECT_EQ(*again, *program);
  EXPECT_EQ(scans_, 1) << "kept by its root: no scan, no plan";
  // Kept by the root it was linked for: its plan is the program's.
  EXPECT_NE(programs_.linkedPlan(app->images.front(), 0), nullptr);
  EXPECT_EQ(programs_.linkedPlan(lib->images.front(), 0), nullptr);
  lock.letGo();
  handles_.dropReference(*app);
  EXPECT_EQ(programs_.cache().all().size(), 1u) << "it holds the instance of the library's LibCounter";
  handles_.dropReference(*lib);
  EXPECT_TRUE(programs_.cache().all().empty()) << "released with the last image it was kept for";
}

TEST_F(LoaderParts, ANameAHandlesImageImportsIsFoundThroughItAndTakenFromItsProgram) {
  auto [lib, app] = openSeed();
  ASSERT_TRUE(lib && app);
  LoaderLock lock(mutex_);
  // As dlsym(handle): not in app.spv's own scope, but where its image's import binds.
  auto found = lookups_.lookup(lock, app, "LibDeviceFunc");
  ASSERT_TRUE(!!found) << errorText(found);
  EXPECT_EQ(found->definition.image, lib->images.front());
  EXPECT_EQ(found->through, app->images.front());
  EXPECT_EQ(links(), 0u) << "found, not linked";
  auto located = lookups_.locate(lock, app, "LibDeviceFunc");
  ASSERT_TRUE(!!located) << errorText(located);
  EXPECT_EQ(located->label, image("lib.spv") + ": image 0 (spirv)");
  lock.takeAgain();
  EXPECT_EQ(located->program, images_[app->images.front()].programAt(0)->program)
      << "the program app.spv's kernels use";
  EXPECT_EQ(links(), 1u);
  EXPECT_EQ(errorText(lookups_.lookup(lock, app, "Nowhere")),
            image("app.spv") + ": undefined device symbol `Nowhere`");
}

TEST_F(LoaderParts, AProgramForARuntimeIsItsOwnHoldsItsInstancesAndIsRetiredWhenTheRuntimeLetsGo) {
  // As a host library's CUDA objects register (include/devdl_cuda.h): the library's images are the
  // roots, linked for the runtime, which loads the program; devdl then looks up in what it loaded.
  auto [lib, app] = openSeed();
  ASSERT_TRUE(lib && app);
  std::vector<std::string> loads;
  backend::RuntimeLoad runtime{[&](std::string_view binary, const char *anchor) -> llvm::Expected<void *> {
    loads.push_back(std::string(binary) + " with " + anchor);
    return static_cast<void *>(&loads);
  }};
  const uint32_t root = lib->images.front();
  LoaderLock lock(mutex_);
  auto program = programs_.programForRuntime(lock, lib->images, "liblib.so", runtime);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(loads, std::vector<std::string>{"fake program for a runtime 0 with fake anchor"});
  ASSERT_EQ(links(), 1u);
  EXPECT_TRUE(fake::links().front().forRuntime);
  EXPECT_EQ(images_[root].programAt(0), *program) << "the root's kernels are looked up there";
  EXPECT_EQ(programs_.cache().defining(root, "LibCounter", (*program)->device), *program)
      << "it holds the library's variable: the runtime finds it there by name";
  // The application's program reaches that instance through its cell, set to where it lies.
  auto appProgram = programs_.programFor(lock, app->images.front(), 0);
  ASSERT_TRUE(!!appProgram) << errorText(appProgram);
  ASSERT_EQ(links(), 2u);
  EXPECT_FALSE(fake::links().back().forRuntime);
  auto instance = (*program)->program->variable("LibCounter");
  ASSERT_TRUE(!!instance) << errorText(instance);
  EXPECT_EQ((*fake::links().back().values)[instanceCellName("LibCounter")],
            reinterpret_cast<uint64_t>(instance->address));
  // Registered again while that program holds the instance: refused, naming the variable.
  EXPECT_EQ(errorCode(programs_.programForRuntime(lock, lib->images, "liblib.so", runtime).takeError()),
            ErrorCode::Unsupported);
  EXPECT_EQ(loads.size(), 1u) << "nothing more was loaded";
  // The runtime unloaded it: devdl lets go of it, whatever still reaches it.
  programs_.release(*program);
  EXPECT_FALSE(programs_.cache().contains(*program));
  EXPECT_EQ(images_[root].programAt(0), nullptr);
}

// As the host loader resolves a library opened RTLD_LOCAL: in the global scope, then in the
// library and the libraries it needs, which its dlopen brought in local with it.
TEST_F(LoaderParts, ALocalHostLibrarysImagesResolveInTheLibrariesItNeeds) {
  // devdl_test_local_plugin carries app.spv, whose LibDeviceFunc devdl_test_local_library's
  // lib.spv defines; the plugin needs that library (DT_NEEDED).
  void *host = dlopen(DEVDL_TEST_LOCAL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  EXPECT_EQ(linkedForRuntime(DEVDL_TEST_LOCAL_PLUGIN),
            (std::vector<std::string>{std::string(DEVDL_TEST_LOCAL_PLUGIN) + ": image 0 (spirv)",
                                      std::string(DEVDL_TEST_LOCAL_LIBRARY) + ": image 0 (spirv)"}));
  // Not in the global scope: an image of the process resolves there only.
  OpenRecord record;
  Handle *app = add(image("app.spv"), DEVDL_LAZY, record);
  ASSERT_NE(app, nullptr);
  LoaderLock lock(mutex_);
  auto appProgram = programs_.programFor(lock, app->images.front(), 0);
  ASSERT_FALSE(!!appProgram);
  EXPECT_NE(errorText(appProgram).find("undefined device symbol `LibDeviceFunc`"), std::string::npos)
      << errorText(appProgram);
  lock.letGo();
  dlclose(host);
}

// And the files its images need (devdl-pack --needed), loaded with it, as their own DT_NEEDED.
TEST_F(LoaderParts, ALocalHostLibrarysImagesResolveInTheFilesTheyNeed) {
  // devdl_test_needing carries app.spv, which needs lib.spv from $ORIGIN/images.
  void *host = dlopen(DEVDL_TEST_NEEDING, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  EXPECT_EQ(linkedForRuntime(DEVDL_TEST_NEEDING),
            (std::vector<std::string>{std::string(DEVDL_TEST_NEEDING) + ": image 0 (spirv)",
                                      image("lib.spv") + ": image 0 (spirv)"}));
  dlclose(host);
}

TEST_F(LoaderParts, APreloadedFileIsAGlobalHandleThatStays) {
  ScopedVariable preload("DEVDL_PRELOAD", image("lib.spv"));
  LoaderLock lock(mutex_);
  scan_.scan(lock);
  ASSERT_EQ(handles_.all().size(), 1u);
  const Handle &lib = *handles_.all().front();
  EXPECT_TRUE(lib.global);
  EXPECT_TRUE(lib.nodelete);
  EXPECT_TRUE(scopes_.isGlobal(lib.images.front()));
  scan_.scan(lock);
  EXPECT_EQ(handles_.all().size(), 1u) << "preloaded once";
}

}  // namespace
}  // namespace devdl::test
