// The objects LD_PRELOAD names, as the host loader reads that list, and the constructors of those
// that carry no device code, run before CUDA starts while the program is starting.
#pragma once

#include <string>
#include <vector>

namespace devdl::host {

/// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list);

/// Runs, once in the process, the constructors the host loader has not run yet of the LD_PRELOAD
/// objects that carry no device code (no bundle, no registration with devdl): a library's
/// registration that links its CUDA objects while the program starts calls this before it starts
/// CUDA. Tools inject themselves into a CUDA program with LD_PRELOAD and set up in their
/// constructors what must be in place before the CUDA driver initializes (compute-sanitizer
/// disables itself otherwise: "CUDA initialized before the Sanitizer"), but the host loader
/// runs a preloaded object's constructors after those of the libraries the program needs, whose
/// registrations come first. dlopen(RTLD_NOLOAD) runs them, in the host loader's order (the
/// last preloaded first), as it does for any object it opens that is not initialized yet. A
/// preloaded object that carries device code keeps its turn: its registration links it after
/// the libraries the host loader initialized before it, as it would otherwise.
void initializePreloadedTools();

}  // namespace devdl::host
