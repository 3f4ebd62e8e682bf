"""Make the checkout importable as ansible_collections.netscale.multinic (scripts/setup.sh links it)."""
import hashlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, ".build")
link = os.path.join(BUILD, "ansible_collections", "netscale", "multinic")
if not os.path.exists(link):
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(ROOT, link)
if BUILD not in sys.path:
    sys.path.insert(0, BUILD)

# The lab inventories' vault (inventories/lab/group_vars/all/vault.yml): its password file, written by
# scripts/setup.sh, for every ansible command the tests start (scripts/test.sh exports the same).
_vault_password = os.path.join(ROOT, ".cache", "lab-vault-password")
if os.path.exists(_vault_password):
    os.environ.setdefault("ANSIBLE_VAULT_PASSWORD_FILE", _vault_password)

# Hypothesis' per-example deadline (200 ms) is a timing assertion: on a loaded 2-core machine it failed
# property tests that pass (test_md5_placeholders under load 10). Speed is measured in bench/, not here.
try:
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("netscale", deadline=None)
    _hypothesis_settings.load_profile("netscale")
except ImportError:  # hypothesis is in requirements-test.txt; unit tests that need it import it themselves
    pass


@pytest.fixture
def tree_digest():
    """``digest(folder)``: sha256 over every file's path and bytes below ``folder`` (a tree left untouched by a
    refused change digests the same)."""
    def digest_of(folder):
        digest = hashlib.sha256()
        for base, _dirs, files in sorted(os.walk(str(folder))):
            for name in sorted(files):
                path = os.path.join(base, name)
                digest.update(path.encode())
                with open(path, "rb") as handle:
                    digest.update(handle.read())
        return digest.hexdigest()
    return digest_of


def pytest_configure(config):
    # every lab test module carries pytestmark = e2e; registered once here for all of tests/e2e
    config.addinivalue_line("markers", "e2e: live test (root, namespaces, FRR, ExaBGP)")
