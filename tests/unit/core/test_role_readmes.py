"""Every role's README names every variable of every entry point in its meta/argument_specs.yml
(the READMEs are written by hand; this keeps them from drifting)."""
import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))


@pytest.mark.parametrize("spec_path", ROLES, ids=lambda p: p.split(os.sep)[-3])
def test_readme_lists_every_variable(spec_path):
    role = os.path.dirname(os.path.dirname(spec_path))
    with open(spec_path) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    with open(os.path.join(role, "README.md")) as handle:
        readme = handle.read()
    missing = sorted("%s (%s)" % (var, entry) for entry, spec in specs.items()
                     for var in (spec.get("options") or {}) if "`%s`" % var not in readme)
    assert not missing, "%s/README.md does not name: %s" % (os.path.basename(role), ", ".join(missing))


def test_every_role_is_checked():
    assert len(ROLES) == len(glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))) >= 5
