"""A lab said "ready" in a state file under tmp_path, for the lab_monitoring unit tests (no node runs)."""
import json
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAB_TOPOLOGY = os.path.join(REPO, "inventories", "lab", "fabric.yml")


@pytest.fixture
def ready_lab(tmp_path):
    """The lab inventory's fabric with a state file saying "ready" (nothing here starts a node)."""
    lab = open_lab(LAB_TOPOLOGY, state_root=str(tmp_path))
    os.makedirs(lab.sdir)
    with open(lab.state_file, "w") as f:
        json.dump({"fabric": lab.fabric, "status": "ready", "nodes": {}, "resources": []}, f)
    return lab
