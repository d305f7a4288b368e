"""A run made from a checkout with uncommitted changes says so: its commit alone does not name the code."""

from __future__ import annotations

import subprocess

from layerscope_core.provenance import commit_label, git_dirty


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_git_dirty_follows_tracked_code_changes_only(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    assert git_dirty(tmp_path) is False
    (tmp_path / "new.txt").write_text("untracked\n")  # an untracked file changes no code that ran
    assert git_dirty(tmp_path) is False
    (tmp_path / "notes.md").write_text("v1\n")
    _git(tmp_path, "add", "notes.md")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "two")
    (tmp_path / "notes.md").write_text("v2\n")  # a regenerated report or bundle is no code
    assert git_dirty(tmp_path) is False
    (tmp_path / "pkg").mkdir()  # asked from a subfolder (the package's), about the whole checkout
    assert git_dirty(tmp_path / "pkg") is False
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_dirty(tmp_path) is True and git_dirty(tmp_path / "pkg") is True


def test_git_dirty_outside_a_checkout_is_unknown(tmp_path):
    assert git_dirty(tmp_path) is None


def test_commit_label_marks_a_dirty_tree():
    assert commit_label({"git_commit": "abcdef0123", "git_dirty": True}, 7) == "abcdef0+dirty"
    assert commit_label({"git_commit": "abcdef0123", "git_dirty": False}, 7) == "abcdef0"
    assert commit_label({"git_commit": "abcdef0123"}) == "abcdef0123"  # recorded before the flag existed
    assert commit_label(None) == "" and commit_label({"git_dirty": True}) == ""
