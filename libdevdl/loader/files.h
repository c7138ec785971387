// Where device_dlopen finds a file and how it reads it, and the lists of files the environment
// names, as the host loader reads LD_LIBRARY_PATH and LD_PRELOAD and searches its directories.
#pragma once

#include "support/regular_file.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace devdl {

/// Where installed device libraries are: `devdl` in the directory of the library that holds
/// devdl (<libdir>/devdl), as ld.so has its own directories.
std::string defaultLibraryDirectory();
/// Makes `dir` the default directory: for devdl's tools, which are not beside the library.
void useDefaultLibraryDirectory(std::string dir);

/// The image that needs a file by name (devdl/module needed), for its search: the path of the
/// file that holds it ($ORIGIN is that path's directory), or the name of the memory it was opened
/// from (no $ORIGIN), and its run path.
struct Needer {
  std::string_view name;
  bool isFile;
  std::string_view runPath;
};

/// The file a name stands for, opened: a name with a slash is taken as it is; one without is
/// looked for as ld.so looks for a library: in the run path of the image that needs it (with
/// `needer`), in DEVDL_LIBRARY_PATH's directories, then in the default directory, and never in the
/// current directory. In a secure-execution (setuid) process the variable is ignored, as
/// LD_LIBRARY_PATH is, and $ORIGIN honoured as glibc honours it: alone at the start of a directory
/// of the run path that then lies in the default directory. DEVDL_DEBUG=files says each place
/// tried, as LD_DEBUG=libs does; a name found nowhere is NotFound, naming the places (and the
/// needer: "pkg/app.devdl needs libm.devdl: not found in ..."). A needed name with a slash is
/// refused: where a needed file is comes from the run path.
llvm::Expected<RegularFile> openNamedFile(const char *name, const Needer *needer = nullptr);

}  // namespace devdl
