# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Python's cyclic garbage collector paused while a fabric's data is built.

Planning, the inventory view and rendering a region build millions of small dicts and lists that
live until the step ends. With the collector on, each full collection walks the whole growing heap:
on the 100K-GPU region that was 60 % of the inventory's CPU (docs/performance.md, "Fleet scale").
Reference counting still frees everything that is not in a cycle; cycles made meanwhile wait for
the next collection after the pause.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused(freeze=False):
    """Disable the collector inside the block (if it was enabled). ``freeze``: after a block that
    ended normally, run one collection and move every surviving object to the permanent generation
    (gc.freeze): data that lives as long as the process (an inventory) is never walked again, by this
    process or by the workers it forks (no copy-on-write of it caused by the collector)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
    if was_enabled and freeze:
        gc.collect()
        gc.freeze()
