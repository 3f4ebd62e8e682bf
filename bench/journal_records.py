# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time to record a wave's end in the rollout journal (module_utils/rollout/records.py, what rollout_decide's
wave_end and rollout_journal write): the wave's hosts passed and seven gate results per host, into a journal that
already holds the wave's hosts deployed. Prints figures, asserts nothing (docs/performance.md).

  .venv/bin/python bench/journal_records.py [--hosts 100 300 1000] [--gates 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import records  # noqa: E402


def wave_end_seconds(count, gates):
    hosts = ["h%d" % i for i in range(count)]
    with tempfile.TemporaryDirectory(prefix="netscale-journal-bench.") as work:
        where = {"dir": work, "rollout_id": "bench", "job": "j1"}
        records.record(where, [{"_record": "host", "hosts": hosts, "state": "deployed", "wave": "w"}])
        items = [{"_record": "host", "hosts": hosts, "state": "passed", "wave": "w"}]
        items += [{"_record": "gate", "gate": "g%d" % k, "name": "g%d@%s" % (k, h), "verdict": "pass",
                   "values": {"n": 1}, "wave": "w"} for h in hosts for k in range(gates)]
        items.append({"_record": "wave", "name": "w", "status": "pass", "hosts": hosts})
        t0 = time.monotonic()
        records.record(where, items)
        return time.monotonic() - t0, len(items)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--gates", type=int, default=7)
    args = parser.parse_args(argv)
    for count in args.hosts:
        seconds, items = wave_end_seconds(count, args.gates)
        print("%5d hosts, %6d records: %.3f s" % (count, items, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
