#!/usr/bin/env python3
"""Checks the shape of libdevdl/ that docs/architecture.md draws: each folder includes only its own
files and those of the folders below it, the includes between files make no cycle, and no file
is longer than 500 lines. Prints each violation; exits 1 if there is any."""
import os
import re
import sys

# Lowest first: a folder may include its own files and those of the folders before it.
LAYERS = ["support", "bundle", "image", "host", "resolve", "backend", "store", "cache", "loader", "api"]
MOST_LINES = 500
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
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{len(files)} files of libdevdl/ in {len(LAYERS)} layers: no upward include, no cycle, none over {MOST_LINES} lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
