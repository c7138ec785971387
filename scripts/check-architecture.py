#!/usr/bin/env python3
"""Checks the shape of libdevdl/ that docs/architecture.md draws: each folder includes only its own
files and those of the folders below it, the includes between files make no cycle, no file is
longer than 500 lines, no function longer than 60 and no class or struct declares more than 30
members (measured by universal-ctags: its functions' extents, and its members in headers). Prints
each violation; exits 1 if there is any."""
import collections
import os
import re
import shutil
import subprocess
import sys

# Lowest first: a folder may include its own files and those of the folders before it.
LAYERS = ["support", "bundle", "image", "host", "resolve", "backend", "store", "cache", "loader", "api"]
MOST_LINES = 500
MOST_FUNCTION_LINES = 60
MOST_MEMBERS = 30
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main(root):
    library = os.path.join(root, "libdevdl")
    files = {}
    for folder, _, names in os.walk(library):
        for name in names:
            if name.endswith((".h", ".cpp", ".c")):
                path = os.path.relpath(os.path.join(folder, name), library)
                with open(os.path.join(library, path), encoding="utf-8") as f:
                    files[path] = f.read()
    problems = []
    graph = {}
    for path, text in sorted(files.items()):
        lines = text.count("\n")
        if lines > MOST_LINES:
            problems.append(f"libdevdl/{path}: {lines} lines (at most {MOST_LINES})")
        layer = path.split("/")[0]
        if layer not in LAYERS:
            problems.append(f"libdevdl/{path}: in no layer (scripts/check-architecture.py lists them)")
            continue
        graph[path] = []
        for included in INCLUDE.findall(text):
            if included not in files:
                continue  # the public header, or another project's
            graph[path].append(included)
            target = included.split("/")[0]
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                problems.append(f"libdevdl/{path} includes {included}: {layer}/ is below {target}/")
    # Cycles, by depth-first search over the files.
    state = {}

    def visit(path, stack):
        state[path] = "open"
        stack.append(path)
        for included in graph.get(path, []):
            if state.get(included) == "open":
                cycle = stack[stack.index(included):] + [included]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif included not in state:
                visit(included, stack)
        stack.pop()
        state[path] = "done"

    for path in sorted(graph):
        if path not in state:
            visit(path, [])
    problems += sizes(library, files)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{len(files)} files of libdevdl/ in {len(LAYERS)} layers: no upward include, no cycle, none over "
              f"{MOST_LINES} lines, no function over {MOST_FUNCTION_LINES}, no class over {MOST_MEMBERS} members")
    return 1 if problems else 0


def sizes(library, files):
    """The functions over MOST_FUNCTION_LINES lines (from their signature to their closing brace) and
    the classes and structs that declare over MOST_MEMBERS members (data, functions, prototypes; not
    the functions they delete), as universal-ctags reads them."""
    ctags = shutil.which("ctags")
    if not ctags or "Universal Ctags" not in subprocess.run([ctags, "--version"], capture_output=True,
                                                            text=True).stdout:
        return ["no universal-ctags to measure functions and classes with (scripts/setup-debian.sh installs it)"]
    listing = subprocess.run(
        [ctags, "-R", "--languages=C++", "--map-C++=+.h", "--kinds-C++=+p-l", "--extras=-q", "--fields=+neKZs",
         "-x", "--_xformat=%K\t%N\t%{scope}\t%{scopeKind}\t%n\t%{end}\t%F", library],
        capture_output=True, text=True, check=True).stdout
    problems = []
    members = collections.Counter()
    lines = {}  # a header's lines, split once
    for line in listing.splitlines():
        kind, name, scope, scope_kind, start, end, path = line.split("\t")
        where = os.path.relpath(path, os.path.dirname(library))
        if kind == "function" and end.isdigit() and int(end) - int(start) + 1 > MOST_FUNCTION_LINES:
            problems.append(f"{where}:{start}: function {name} has {int(end) - int(start) + 1} lines "
                            f"(at most {MOST_FUNCTION_LINES})")
        if kind in ("member", "prototype", "function") and path.endswith(".h") and scope_kind in ("class", "struct"):
            relative = os.path.relpath(path, library)
            if relative not in lines:
                lines[relative] = files[relative].splitlines()
            declaration = lines[relative][int(start) - 1]
            if "= delete" not in declaration:
                members[scope] += 1
    for name, count in sorted(members.items()):
        if count > MOST_MEMBERS:
            problems.append(f"class {name} declares {count} members (at most {MOST_MEMBERS})")
    return problems


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
