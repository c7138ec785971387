"""The tools a wheel installs (devdl-nm, devdl-pack, devdl-cache): each command on the PATH runs
the program of that name in the module's bin folder, as the `cmake` and `ninja` wheels do."""

import os
import sys
from typing import NoReturn


def _run(name: str) -> NoReturn:
    from . import _installed
    program = os.path.normpath(os.path.join(os.path.dirname(__file__), _installed.BIN_DIR, name))
    try:
        os.execv(program, [name] + sys.argv[1:])
    except OSError as e:
        sys.exit("%s: cannot run %s: %s" % (name, program, e.strerror))


def nm() -> NoReturn:
    _run("devdl-nm")


def pack() -> NoReturn:
    _run("devdl-pack")


def cache() -> NoReturn:
    _run("devdl-cache")
