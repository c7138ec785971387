"""python3 -m devdl --cmake-dir | --include-dir | --library | --version: where the installed devdl
is, for build systems (as pybind11 and nanobind answer): `cmake -Ddevdl_DIR=$(python3 -m devdl
--cmake-dir)`, then find_package(devdl)."""

import argparse
import os
import sys


def _installed(name: str) -> str:
    from . import _installed
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), getattr(_installed, name)))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python3 -m devdl", description=__doc__.split(":")[0] + ".")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--cmake-dir", action="store_true", help="the folder of devdlConfig.cmake (devdl_DIR)")
    group.add_argument("--include-dir", action="store_true", help="the folder of devdl.h")
    group.add_argument("--library", action="store_true", help="libdevdl.so.0, the library the module loads")
    group.add_argument("--version", action="store_true", help="the library's version")
    args = parser.parse_args()
    if args.version:
        import devdl
        print(devdl.__version__)
    else:
        print(_installed("CMAKE_DIR" if args.cmake_dir else "INCLUDE_DIR" if args.include_dir else "LIBRARY"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
