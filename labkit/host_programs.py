# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MOVED to ``scripts/build-host-programs.py`` (build tooling, beside the other generators). This
signpost keeps ``python -m labkit.host_programs`` and ``from labkit import host_programs`` working
until the next release; use the script."""

import importlib.util
import os
import sys

from labkit import REPO

_SPEC = importlib.util.spec_from_file_location("build_host_programs",
                                               os.path.join(REPO, "scripts", "build-host-programs.py"))
_BUILD = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = _BUILD   # dataclasses look their module up there
_SPEC.loader.exec_module(_BUILD)

PROGRAMS = _BUILD.PROGRAMS
bundled_modules = _BUILD.bundled_modules
render = _BUILD.render
out_of_date = _BUILD.out_of_date
main = _BUILD.main

if __name__ == "__main__":
    sys.stderr.write("labkit.host_programs moved: run python scripts/build-host-programs.py\n")
    sys.exit(main())
