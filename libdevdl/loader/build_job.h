// One build of a program (loader/program_build.cpp): what it needs once the loader's mutex is
// let go, which variables' instances it reaches or will hold (loader/instances.cpp), and its
// phases: internal to Programs.
#pragma once

#include "loader/programs.h"

#include <chrono>
#include <deque>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl {

// What a build needs once the mutex is let go: copies of whatever the loader may change meanwhile.
struct BuildInputs {
  cache::ProgramKey key;
  std::vector<uint32_t> images;
  std::vector<std::vector<std::string_view>> interposed;     // the inputs' spans are into it
  std::vector<std::vector<std::string_view>> elsewhere;        // and into it
  std::vector<std::vector<std::string_view>> interposedElsewhere;  // and into it
  std::vector<backend::LinkInput> inputs;
  size_t bindings = 0;
  /// One instance of each variable on a device: those whose instance another program holds,
  /// with that program (referenced while the job lives; its native program, to ask the address
  /// with the mutex let go) and how messages name it and the variable's image; and the variables
  /// whose instance this program will hold, by image.
  struct Reached {
    std::string_view name;
    std::string_view shown;  // how messages name it (variableShown)
    std::string cell;        // through which it is reached (image/instance_cells.h)
    std::string why;         // why it cannot be, where that is known before the link
    uint32_t image;
    cache::LinkedProgram *lender;
    std::shared_ptr<backend::Program> program;
    std::string imageLabel, lenderLabel;
  };
  std::vector<Reached> reached;
  std::vector<std::pair<uint32_t, std::string_view>> instances;
  /// Interposed variables it keeps a copy of (LinkedProgram::copies); and why it cannot be linked
  /// where it would hold a second copy of a variable another program keeps one of.
  std::vector<std::pair<uint32_t, std::string_view>> copies;
  std::string secondCopy;
};

struct Programs::BuildJob {
  using Inputs = BuildInputs;
  Inputs linked, alone;  // with the importers, and the root's plan alone should that not link
  uint64_t generation;   // the loader's when it was prepared: a failure is remembered for it
  std::vector<cache::LinkedProgram::Use> uses;  // the root's first, then the importers'
  std::deque<backend::SpecConstants> specConstants;
  std::vector<uint32_t> held;                          // the linked images, held while it builds
  std::vector<cache::LinkedProgram *> lenders;         // holding instances it reaches: referenced while it builds
  std::vector<host::ObjectLoad> hosts;                 // of the linked images: held while it builds
  std::vector<std::vector<host::ObjectLoad>> useHosts;  // of each use's plan: held while it is used
  backend::Device *device = nullptr;
  /// A device of the same model that linked it already lends its binary (for `linked`, and for
  /// `alone`); while two are in use, the binary is kept for the other. Asked before the mutex goes.
  cache::SameModel sameModel, aloneModel;
  bool keepBinary = false;
  const backend::RuntimeLoad *runtime = nullptr;  // the request's
  /// The references on `hosts` while it builds (none where one was unloaded meanwhile: look again).
  std::optional<std::vector<std::shared_ptr<const void>>> references;
};

/// What buildUnlocked made: the program (or the error), the key that failed with its importers
/// (remembered once the mutex is held again), and how long it took.
struct Programs::Made {
  llvm::Expected<cache::Built> built = cache::Built{};
  std::optional<cache::ProgramKey> jointFailed;
  double ms = 0;
};

/// A plan's program built once, in phases: prepared as the build is made (its inputs copied, what
/// it reads held), refused where it cannot be built, built with the mutex let go (one thread's
/// turn), its failure said and remembered, or kept for the uses it serves; what it held is
/// released as it ends, however the build ends.
class Programs::Build {
 public:
  /// Phase 1: what the build needs once the mutex is let go, its images held.
  Build(Programs &programs, Request &request, Planned &planned);
  /// Releases the job's holds: its images, the programs it reaches, programs no longer needed.
  ~Build();
  Build(const Build &) = delete;
  Build &operator=(const Build &) = delete;

  /// The plan's program, built with its importers, else alone; look again where another thread
  /// builds it or what it needs changed meanwhile.
  llvm::Expected<Outcome<cache::LinkedProgram *>> run(LoaderLock &lock);

 private:
  /// The plan with the loaded images that import from it, their uses into the job; nullopt where
  /// it is linked alone.
  std::optional<LinkPlan> withImporters();
  /// What the device links for `plan`, copied into the job (`into`: its linked or alone inputs).
  void inputsOf(const LinkPlan &plan, const cache::ProgramKey &key, BuildInputs &into);
  /// DEVDL_DEBUG=bindings: each import's definition, each definition made local, each instance reached.
  void sayBindings(const LinkPlan &linked) const;
  /// Phase 2: why the job is not built (a second copy of a variable; a build that failed since
  /// the loader last changed, given again): an error, or none.
  std::optional<llvm::Error> refuse();
  /// Phase 3, with the mutex let go: the job built (with its importers, else alone).
  Made buildUnlocked();
  /// The program of `inputs`, its cells set to where the instances it reaches lie.
  llvm::Expected<cache::Built> buildInputs(const BuildInputs &inputs, const cache::SameModel &same);
  /// Phase 4: a failed build's error, said as well as devdl knows why, and remembered.
  llvm::Error explainFailure(llvm::Error err);
  /// Phase 5: the built program kept for the uses whose roots are still loaded; null where another
  /// serves instead or it would hold a second instance of a variable.
  cache::LinkedProgram *keepBuilt(Made &made);
  /// Keeps a program made for `uses`, holding its images while it lives (and its binary, where it
  /// was kept for another device of the model).
  cache::LinkedProgram *keep(cache::Built &made, std::vector<cache::LinkedProgram::Use> uses);

  Programs &programs_;
  ImageTable &images_;
  Request &request_;
  Planned &planned_;
  BuildJob job_;
};

}  // namespace devdl
