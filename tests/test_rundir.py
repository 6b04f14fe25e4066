"""Run-directory writes: atomic, and readable like any other output (the umask decides, as for open())."""

from __future__ import annotations

import os

import pytest

from rlgpt import rundir


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_atomic_writes_get_the_mode_open_would_give(tmp_path, umask):
    old = os.umask(umask)
    try:
        assert rundir.current_umask() == umask
        rundir.write_json(tmp_path / "a.json", {"x": 1})
        rundir.write_yaml(tmp_path / "b.yaml", {"x": 1})
        with open(tmp_path / "c.txt", "w") as f:
            f.write("reference")
    finally:
        os.umask(old)
    reference = (tmp_path / "c.txt").stat().st_mode & 0o777
    assert reference == 0o666 & ~umask
    for name in ("a.json", "b.yaml"):
        assert (tmp_path / name).stat().st_mode & 0o777 == reference, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.yaml", "c.txt"]  # no temp files left


def test_atomic_write_replaces_the_whole_file(tmp_path):
    path = tmp_path / "x.txt"
    rundir.atomic_write_text(path, "a much longer first version\n")
    rundir.atomic_write_text(path, "short\n")
    assert path.read_text() == "short\n"
