# -*- coding: utf-8 -*-
"""The stack on the lab's rack mns-r1 (2-NIC and 4-NIC host) with host_datapath_ebpf=false (plain
kernel forwarding): issue 5's "same with eBPF off" cases. One lab for the module; torn down by
playbooks/lab.yml, also on failure."""
import pytest

import mns_stack as M
# The shared cases run here with this module's `stack` fixture: imported to be collected.
from stack_cases import (  # pylint: disable=unused-import  # noqa: F401
    build_stack, test_site_converges, test_tor_fib_width, test_bfd_up_on_every_host_session, test_spread,
    test_host_local, test_nic_failure, test_arp_nd_loss_withdraws_the_nic_at_the_tor,
    test_antispoof, test_removal_restores_hosts,
)


@pytest.fixture(scope="module")
def stack():
    st = None
    try:
        st = build_stack("kernel", ["mns-r1-h1", "mns-r1-h2"], ["mns-r1-tor"], check_fresh=False)
        yield st
    finally:
        if st is not None:
            st.lab.close()
        M.lab_teardown()
