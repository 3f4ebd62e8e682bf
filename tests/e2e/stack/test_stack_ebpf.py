# -*- coding: utf-8 -*-
"""The whole stack on the lab (all 4 hosts, both racks), host datapath in eBPF mode: issue 5 and 6
acceptance. One lab for the module; torn down by playbooks/lab.yml, also on failure."""
import pytest

import mns_stack as M
# The shared cases run here with this module's `stack` fixture: imported to be collected.
from stack_cases import (  # pylint: disable=unused-import  # noqa: F401
    build_stack, test_site_converges, test_tor_fib_width, test_bfd_up_on_every_host_session,
    test_bfd_loss_takes_the_nic_out_of_the_egress_set, test_spread, test_host_local,
    test_nic_failure,
    test_sidecar_killed_restarts, test_sidecar_hung_watchdog_restarts, test_sidecar_stopped_degrades_to_nic0, test_drain_file,
    test_guard_refuses_foreign_task_ip, test_bad_input, test_antispoof, test_removal_restores_hosts,
)


@pytest.fixture(scope="module")
def stack():
    st = None
    try:
        st = build_stack("ebpf", ["mns-r1-h1", "mns-r1-h2", "mns-r2-h1", "mns-r2-h2"], ["mns-r1-tor", "mns-r2-tor"],
                         check_fresh=True)
        yield st
    finally:
        if st is not None:
            st.lab.close()
        M.lab_teardown()
