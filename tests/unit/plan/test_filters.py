"""Address filters used by templates."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.netscale.multinic.plugins.filter.addr import FilterModule

F = FilterModule().filters()


def test_filters():
    assert F["ip_address"]("fd00:10::2/64") == "fd00:10::2"
    assert F["prefix_length"]("198.18.0.0/27") == 27
    assert F["prefix_length"]("fd00::1") == 128
    assert F["ip_version"]("198.18.0.1") == 4
    assert F["host_prefix"]("fd00:10::8") == "fd00:10::8/128"


def test_bad_value_names_filter_and_value():
    with pytest.raises(AnsibleFilterError, match="netscale.multinic.ip_version: 'nope'"):
        F["ip_version"]("nope")
