"""layerscope_core.atomic_file: whole or nothing, with the permissions a plain write would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from layerscope_core.atomic_file import atomic_file, write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path: Path) -> None:
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"x")  # what open() gives under this process's umask
    write_atomic(tmp_path / "bundle.zip", b"data")
    assert _mode(tmp_path / "bundle.zip") == _mode(plain)
    assert (tmp_path / "bundle.zip").read_bytes() == b"data"


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "bundle.zip"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    write_atomic(target, b"new")
    assert _mode(target) == 0o640 and target.read_bytes() == b"new"


def test_an_error_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "bundle.zip"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(target) as fh:
        fh.write(b"half")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.zip"]
