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


def test_read_text_missing_is_none(tmp_path):
    assert writing.read_text(str(tmp_path / "nothing")) is None
    (tmp_path / "f").write_text("x")
    assert writing.read_text(str(tmp_path / "f")) == "x"


def test_file_install_compares_writes_in_order_and_is_idempotent(tmp_path, monkeypatch):
    folder = tmp_path / "slot1"
    files = {"b.conf": ("key s3cr3t-K\n", 0o600), "a.json": ("{}\n", 0o644)}
    plan = writing.FileInstall(str(folder), files)
    assert list(plan.changed) == [str(folder / "a.json"), str(folder / "b.conf")]
    assert plan.any_changed and all(plan.changed.values())
    assert [d["after_header"] for d in plan.diff] == list(plan.changed)
    assert plan.install(check_mode=True) == plan.changed
    assert not folder.exists(), "check mode wrote"
    written = []
    real = writing.atomic_write

    def recording(path, *args, **kwargs):
        written.append(os.path.basename(path))
        return real(path, *args, **kwargs)
    monkeypatch.setattr(writing, "atomic_write", recording)
    plan.install(order=("b.conf", "a.json"))
    assert written == ["b.conf", "a.json"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "b.conf").stat().st_mode) == 0o600
    assert (folder / "b.conf").read_text() == "key s3cr3t-K\n"
    again = writing.FileInstall(str(folder), files)
    assert not again.any_changed and again.diff == []
    written.clear()
    again.install()
    assert written == []


def test_file_install_mode_drift_rewrites_without_content_diff(tmp_path):
    folder = tmp_path / "d"
    files = {"f": ("x\n", 0o640)}
    writing.FileInstall(str(folder), files).install()
    os.chmod(str(folder / "f"), 0o644)
    drift = writing.FileInstall(str(folder), files)
    assert drift.changed == {str(folder / "f"): True} and drift.diff == []
    drift.install()
    assert stat.S_IMODE((folder / "f").stat().st_mode) == 0o640
    assert not writing.FileInstall(str(folder), files).any_changed


def test_file_install_owner_check_only_given_ids(tmp_path):
    folder = tmp_path / "d"
    files = {"f": ("x\n", 0o644)}
    writing.FileInstall(str(folder), files).install()
    st = (folder / "f").stat()
    other = st.st_gid + 1
    assert writing.FileInstall(str(folder), files, check_owner=(st.st_uid, other)).any_changed
    assert not writing.FileInstall(str(folder), files, check_owner=(st.st_uid, None)).any_changed
    assert writing.FileInstall(str(folder), files, check_owner=(st.st_uid + 1, None)).any_changed


def test_file_install_diff_is_redacted(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "exabgp.conf").write_text('md5-password "old-K1";\n')
    plan = writing.FileInstall(str(folder), {"exabgp.conf": ('md5-password "new-K2";\n', 0o600)},
                               secrets=["old-K1", "new-K2"])
    assert plan.changed == {str(folder / "exabgp.conf"): True}
    flat = repr(plan.diff)
    assert "old-K1" not in flat and "new-K2" not in flat and writing.REDACTED in flat


def test_file_install_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a").write_text("old")
    plan = writing.FileInstall(str(folder), {"a": ("new", 0o644), "b": (object(), 0o644)})
    with pytest.raises(TypeError):
        plan.install(order=("b", "a"))
    assert (folder / "a").read_text() == "old"
    assert sorted(os.listdir(folder)) == ["a"]


def test_remove_dir(tmp_path):
    folder = tmp_path / "slot1"
    assert writing.remove_dir(str(folder)) == (False, {}, None)
    folder.mkdir()
    (folder / "x").write_text("1")
    changed, files, diff = writing.remove_dir(str(folder), check_mode=True)
    assert changed and files == {str(folder / "x"): True} and folder.is_dir()
    assert diff == {"before": "%s present\n" % folder, "after": ""}
    assert writing.remove_dir(str(folder))[0] and not folder.exists()
