# -*- coding: utf-8 -*-
"""The stack lab's helpers now live in labkit/stack_lab.py (shared with bench/gray_stack.py, which may
not import tests/); re-exported here under the name the stack tests use."""
from labkit.stack_lab import (  # pylint: disable=unused-import  # noqa: F401
    DH, HERE, REPO, STATE, STO4, STO6, TOPOLOGY, TRANSIENT_HELPERS, VENV_BIN, WORK, Lab, adhoc, by_end, diff_dumps, env,
    lab_build, lab_vars, lab_teardown, max_stall, playbook, recap, shares, sh, site, stalls,
)
