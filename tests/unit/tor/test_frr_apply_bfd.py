# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""frr_apply: taking BFD away from a ToR (restore of a pre-BFD copy) converges on FRR 8.4.

fixtures/reload_test_bfd_to_pre_bfd.txt is the real ``frr-reload.py --test`` output of FRR 8.4.4 for the
lab-r1 ToR: running = the ToR policy with BFD, candidate = the same policy without BFD. frr-reload.py
sends those lines in that order: "no bfd" before "bfd / no profile", "no neighbor X bfd" before "no
neighbor X bfd profile/check-control-plane-failure", and both later lines re-create what the earlier
ones removed. The live check is tests/e2e/vipinjector/test_bfd_harness.py."""

from __future__ import annotations

import os

from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply

HERE = os.path.dirname(os.path.abspath(__file__))


def restore_test_output():
    with open(os.path.join(HERE, "fixtures", "reload_test_bfd_to_pre_bfd.txt")) as f:
        return f.read()


def test_bfd_options_first_from_real_reload_output():
    dels, dummy = frr_apply.parse_reload_test(restore_test_output())
    first = frr_apply.bfd_options_first(dels)
    groups = ["HOST-lab-r1-h1-S1", "HOST-lab-r1-h1-S2", "HOST-lab-r1-h2-S1", "HOST-lab-r1-h2-S2"]
    want = []
    for g in groups:
        want += [("router bgp 4200001001", "no neighbor %s bfd profile multinic-hosts" % g),
                 ("router bgp 4200001001", "no neighbor %s bfd check-control-plane-failure" % g)]
    assert first == want + [(None, "no bfd")]
    # "no neighbor X bfd" itself stays with frr-reload.py (after the options)
    assert not [c for dummy, c in first if c.startswith("no neighbor") and c.endswith(" bfd")]


def test_nothing_first_when_bfd_is_added_or_kept():
    assert frr_apply.bfd_options_first([]) == []
    # only the profile's timers change: the node stays, nothing to send first
    assert frr_apply.bfd_options_first(["bfd", " profile multinic-hosts", "  no detect-multiplier 5"]) == []
    # a neighbor line that merely mentions bfd in another context is left alone
    assert frr_apply.bfd_options_first(["interface eth0", " no neighbor x bfd profile p"]) == []


class FakeFrr(object):
    """run(argv) for apply(): records every call; frr-reload --test answers from ``tests`` in turn."""

    def __init__(self, tests, reload_rc=0):
        self.calls = []
        self.tests = list(tests)
        self.reload_rc = reload_rc

    def __call__(self, argv):
        self.calls.append(list(argv))
        if "--test" in argv:
            return 0, self.tests.pop(0), ""
        if "--reload" in argv:
            return self.reload_rc, "", ""
        return 0, "", ""


def test_apply_sends_bfd_options_then_no_bfd_before_frr_reload():
    converged = "\nLines To Delete\n===============\n\nLines To Add\n============\n"
    run = FakeFrr([restore_test_output(), converged])
    target = frr_apply.FrrTarget(confdir="/tmp/x", vty_socket="/tmp/x", rundir="/tmp/x")
    left, warnings = frr_apply.apply(run, target, "/tmp/x/cand.conf")
    assert left == ([], []) and warnings == []
    kinds = ["test" if "--test" in c else "reload" if "--reload" in c else "vtysh" for c in run.calls]
    assert kinds == ["test", "vtysh", "reload", "test"]
    vt = run.calls[1]
    assert vt[:3] == ["/usr/bin/vtysh", "--vty_socket", "/tmp/x"]
    cmds = [vt[i + 1] for i, a in enumerate(vt) if a == "-c"]
    # one vtysh call: the context once, the options, leave it, then the whole bfdd node
    assert cmds[:2] == ["configure terminal", "router bgp 4200001001"]
    assert cmds[2:10] == [c for dummy, c in frr_apply.bfd_options_first(
        frr_apply.parse_reload_test(restore_test_output())[0])[:8]]
    assert cmds[10:] == ["exit", "no bfd", "end"]


def test_apply_with_known_delta_does_not_measure_twice_and_fails_closed():
    dels = frr_apply.parse_reload_test(restore_test_output())[0]
    still = "\nLines To Delete\n===============\nno bfd\n\nLines To Add\n============\n"
    run = FakeFrr([still], reload_rc=1)
    target = frr_apply.FrrTarget()
    try:
        frr_apply.apply(run, target, "/tmp/cand.conf", dels)
    except frr_apply.FrrApplyError as exc:
        assert "still differs" in str(exc) and "no bfd" in str(exc)
    else:
        raise AssertionError("a reload that leaves differences must raise")
    assert sum(1 for c in run.calls if "--test" in c) == 1


def test_vtysh_failure_before_reload_is_an_error_naming_the_commands():
    def run(argv):
        return (1, "", "% Unknown command") if argv[0].endswith("vtysh") else (0, "", "")
    try:
        frr_apply.apply(run, frr_apply.FrrTarget(), "/tmp/cand.conf", ["no bfd"])
    except frr_apply.FrrApplyError as exc:
        assert "no bfd" in str(exc) and "rc 1" in str(exc)
    else:
        raise AssertionError("expected FrrApplyError")
