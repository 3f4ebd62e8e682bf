"""The one writing path: atomic writes leave old-or-new, never a part; redaction covers every form."""
import os
import stat

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils import writing


def test_atomic_write_sets_mode_before_the_file_appears(tmp_path):
    path = tmp_path / "sub" / "key.conf"
    writing.atomic_write(str(path), "secret\n", mode=0o600)
    assert path.read_text() == "secret\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(path.parent)) == ["key.conf"]


def test_atomic_write_failure_leaves_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")
    with pytest.raises(TypeError):
        writing.atomic_write(str(path), object())
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_write_if_changed_reports_change_once(tmp_path):
    path = str(tmp_path / "a")
    assert writing.write_if_changed(path, "x", check_mode=True) is True
    assert not os.path.exists(path)
    assert writing.write_if_changed(path, "x") is True
    assert writing.write_if_changed(path, "x") is False
    assert writing.write_if_changed(path, "x", mode=0o600) is True


def test_staged_write_all_or_nothing(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with open(a, "w") as handle:
        handle.write("old-a")
    with pytest.raises(RuntimeError):
        with writing.StagedWrite() as batch:
            batch.stage(a, "new-a")
            batch.stage(b, "new-b")
            raise RuntimeError("boom")
    assert open(a).read() == "old-a"
    assert sorted(os.listdir(tmp_path)) == ["a"]
    writing.atomic_write_many([(a, "new-a"), (b, "new-b")])
    assert (open(a).read(), open(b).read()) == ("new-a", "new-b")


@pytest.mark.parametrize("text", [
    " neighbor fd00::1 password s3cr3t-K\n",
    "  neighbor HOSTS password 7 s3cr3t-K\n",
    "    md5-password s3cr3t-K;\n",
    "authentication-key 0 s3cr3t-K",
    "key-string s3cr3t-K",
])
def test_redact_text_forms(text):
    out = writing.redact(text)
    assert "s3cr3t-K" not in out
    assert writing.REDACTED in out


def test_redact_literals_and_structures():
    record = {
        "md5_key": "k1",
        "tor_bgp_md5_keys": {"h1": "k2"},
        "vipinjector_md5_password": "k3",
        "diff": {"before": "old k4 here", "after": "new k5 here"},
        "list": ["k4", 3, None],
        "name": "h1",
    }
    out = writing.redact(record, secrets=["k4", "k5"])
    flat = repr(out)
    for key in ("k1", "k2", "k3", "k4", "k5"):
        assert "'%s'" % key not in flat and " %s " % key not in flat
    assert out["name"] == "h1"
    assert out["list"][1:] == [3, None]
    assert record["md5_key"] == "k1", "the input is not modified"


def test_redact_leaves_plain_text_alone():
    assert writing.redact("neighbor fd00::1 remote-as 65001") == "neighbor fd00::1 remote-as 65001"
    assert writing.redact(None) is None
