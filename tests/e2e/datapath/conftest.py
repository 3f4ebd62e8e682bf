# -*- coding: utf-8 -*-
import os

import pytest

from labkit.dp_harness import Fabric


def pytest_collection_modifyitems(config, items):
    # Live tests need root and the kernel features; they never skip silently: fail loudly instead.
    if os.geteuid() != 0:
        raise pytest.UsageError("tests/e2e/datapath needs root (network namespaces, bpffs, tc)")


@pytest.fixture(scope="module")
def fabric():
    fab = Fabric(hosts=("lab-r1-h1", "lab-r1-h2"), tbf="200mbit")
    try:
        yield fab
    finally:
        fab.close()
