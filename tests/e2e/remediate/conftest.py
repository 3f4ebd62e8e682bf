# -*- coding: utf-8 -*-


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: live test (root, namespaces, FRR, ExaBGP)")
