"""A bundle zip read as hostile input: its central directory checked before any member is read,
and every member read in bounded chunks (docs/DESIGN.md#bundles-read-as-hostile-input).

Checked before anything is read or written (:func:`open_checked`), against :class:`Limits`
(settings ``LAYERSCOPE_BUNDLE_MAX_*``): the number of members (read off the end-of-central-
directory record, before the directory itself is parsed), each member's and the total
uncompressed size, each JSON member's size (parsed whole), the compression ratio of a member over
1 MiB, and the names: no absolute path, no ``..`` or empty component, no duplicate, no symbolic
link, folder or other special file, no encryption, only stored or deflated data, and only the
layout ``backend.bundle_export`` writes (:data:`LAYOUT`). A member is then read with
:func:`read_small` (a JSON member, whole up to its limit) or :func:`copy_member` (a binary
member, 1 MiB at a time into a file while it is hashed): never more than the size the directory
declares (``zipfile`` stops there and checks the CRC-32), so a member that lies about its size
is refused as damaged, not inflated.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from worker.in_flight import TRAINING_NAME
from worker.in_flight_measuring import MEASURING_NAME

__all__ = [
    "LAYOUT",
    "JSON_MEMBER",
    "CHUNK",
    "Limits",
    "ZipRefused",
    "open_checked",
    "check_directory",
    "read_small",
    "copy_member",
    "Streamed",
    "streamed",
]

CHUNK = 1 << 20  # bytes read at a time from a binary member
RATIO_FLOOR = 1 << 20  # the compression ratio is checked on members larger than this (small JSON compresses well)
_HEX64 = "[0-9a-f]{64}"
# every member backend.bundle_export writes; nothing else is accepted
LAYOUT = (
    re.compile(r"manifest\.json"),
    re.compile(r"tables/[a-z][a-z0-9_]{0,63}\.json"),
    re.compile(rf"weights/{_HEX64}/(weights\.safetensors|config\.json|provenance\.json)"),
    re.compile(rf"artifacts/{_HEX64}\.safetensors"),
    re.compile(rf"tasks/({_HEX64}|names)\.json"),
    TRAINING_NAME,
    MEASURING_NAME,
)
# members parsed as JSON (read whole, so bounded by ``Limits.json_bytes``)
JSON_MEMBER = re.compile(r".*\.json")


class ZipRefused(ValueError):
    """A bundle zip refused by a rule: ``member`` (None: the archive as a whole) and ``rule``."""

    def __init__(self, member: str | None, rule: str, *, joined: str = ": ") -> None:
        self.member, self.rule = member, rule
        super().__init__(f"{member}{joined}{rule}" if member else rule)


@dataclass(frozen=True)
class Limits:
    """The most a bundle may hold (defaults: ``store.settings.Settings.bundle_max_*``)."""

    members: int
    member_bytes: int
    total_bytes: int
    json_bytes: int
    ratio: float

    @classmethod
    def from_settings(cls) -> Limits:
        from store.settings import get_settings

        s = get_settings()
        return cls(
            s.bundle_max_members,
            s.bundle_max_member_bytes,
            s.bundle_max_total_bytes,
            s.bundle_max_json_bytes,
            s.bundle_max_ratio,
        )


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _member_count(fp: BinaryIO) -> int | None:
    """The member count the end-of-central-directory record states (None: no record found)."""
    # zipfile's own reader of that record (stable since Python 2); ZipFile parses the whole
    # directory into memory at once, so a bundle with millions of members is refused before it
    end = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # zipfile's own end-record reader (private)
    return None if end is None else int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]  # its field index


def open_checked(path: Path | io.BytesIO, limits: Limits | None = None) -> zipfile.ZipFile:
    """``path`` opened as a zip whose central directory passed :func:`check_directory`.

    Raises:
        ZipRefused: the member (or the archive) and the rule it breaks.
        zipfile.BadZipFile, OSError: not a zip, or not readable.
    """
    limits = limits or Limits.from_settings()
    with open(path, "rb") if isinstance(path, str | Path) else _kept_open(path) as fp:
        count = _member_count(fp)
    if count is not None and count > limits.members:
        raise ZipRefused(None, f"{count:,} members, more than the {limits.members:,} a bundle may hold")
    z = zipfile.ZipFile(path)
    try:
        check_directory(z.infolist(), limits)
    except BaseException:
        z.close()
        raise
    return z


class _kept_open:
    """A buffer used as a context manager without closing it (ZipFile reads it afterwards)."""

    def __init__(self, buf: io.BytesIO) -> None:
        self.buf = buf

    def __enter__(self) -> io.BytesIO:
        return self.buf

    def __exit__(self, *exc: object) -> None:
        self.buf.seek(0)


def _name_problem(name: str) -> str | None:
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "an absolute path"
    if ".." in parts:
        return "a '..' path component (a path out of its folder)"
    if name.endswith("/"):
        return "a folder entry (the exporter writes files only)"
    if "" in parts or "." in parts or "\\" in name:
        return "an empty, '.' or backslash path component"
    if not any(p.fullmatch(name) for p in LAYOUT):
        return "not a member the exporter writes (manifest.json, tables/, weights/, artifacts/, tasks/, training/, measuring/)"
    return None


def _kind_problem(info: zipfile.ZipInfo) -> str | None:
    mode = info.external_attr >> 16
    if info.create_system == 3 and mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        return "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file (a device, pipe or folder)"
    if info.flag_bits & 0x1:
        return "encrypted"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return f"compressed with method {info.compress_type} (the exporter writes stored or deflated members)"
    return None


def check_directory(infos: list[zipfile.ZipInfo], limits: Limits) -> None:
    """Check a bundle's central directory (see the module docstring); reads no member.

    Raises:
        ZipRefused: the first member that breaks a rule, and the rule.
    """
    if len(infos) > limits.members:
        raise ZipRefused(None, f"{len(infos):,} members, more than the {limits.members:,} a bundle may hold")
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.orig_filename
        why = _name_problem(name) or _kind_problem(info)
        if why is None and name in seen:
            why = "a duplicate member name (a second copy would silently win)"
        if why is None and info.file_size > limits.member_bytes:
            why = f"{_mib(info.file_size)} uncompressed, over the {_mib(limits.member_bytes)} a member may hold"
        if why is None and JSON_MEMBER.fullmatch(name) and info.file_size > limits.json_bytes:
            why = f"{_mib(info.file_size)} of JSON, over the {_mib(limits.json_bytes)} a JSON member may hold"
        if why is None and info.file_size > RATIO_FLOOR and info.file_size > limits.ratio * max(info.compress_size, 1):
            ratio = info.file_size / max(info.compress_size, 1)
            why = f"compressed {ratio:,.0f}:1, over the {limits.ratio:,.0f}:1 a member over 1 MiB may be (a zip bomb)"
        if why is not None:
            raise ZipRefused(name[:200], why)
        seen.add(name)
        total += info.file_size
        if total > limits.total_bytes:
            raise ZipRefused(
                name[:200], f"the members up to here hold {_mib(total)}, over the {_mib(limits.total_bytes)} in all"
            )


def _damaged(name: str, exc: BaseException) -> ZipRefused:
    return ZipRefused(name, f"is damaged in the zip, or not the size its directory states ({exc})", joined=" ")


def read_small(z: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of member ``name`` (checked by :func:`check_directory`: at most its declared size).

    Raises:
        KeyError: no such member; ZipRefused: damaged (CRC-32, compressed data or size).
    """
    info = z.getinfo(name)
    try:
        with z.open(info) as f:
            data = f.read(info.file_size + 1)  # zipfile stops at the declared size
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise _damaged(name, exc) from None
    return data


def copy_member(z: zipfile.ZipFile, name: str, dst: BinaryIO) -> tuple[int, hashlib._Hash]:
    """Copy member ``name`` into ``dst`` :data:`CHUNK` bytes at a time; returns the bytes copied
    and their running sha256 (copy it to hash more after them).

    Raises:
        KeyError: no such member; ZipRefused: damaged (CRC-32, compressed data or size).
    """
    digest, size = hashlib.sha256(), 0
    try:
        with z.open(name) as src:
            while chunk := src.read(CHUNK):
                digest.update(chunk)
                dst.write(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise _damaged(name, exc) from None
    return size, digest


@dataclass(frozen=True)
class Streamed:
    """A binary member read once without being kept (a training state, a measurement piece):
    ``record`` is ``{"size": bytes, "sha256": hex}`` of what was read, checked against the
    manifest; :meth:`copy_to` copies it again, refusing it if it reads otherwise the second time."""

    name: str
    record: dict[str, int | str]

    def copy_to(self, z: zipfile.ZipFile, dst: BinaryIO) -> None:
        """Copy the member from ``z`` into ``dst`` (:func:`copy_member`).

        Raises:
            ZipRefused: damaged, or not the bytes read the first time (the zip changed meanwhile).
        """
        size, digest = copy_member(z, self.name, dst)
        if {"size": size, "sha256": digest.hexdigest()} != self.record:
            raise ZipRefused(
                self.name, "read otherwise than when it was checked (the bundle changed during the import)"
            )


def streamed(z: zipfile.ZipFile, name: str) -> Streamed:
    """Member ``name`` read through once, :data:`CHUNK` bytes at a time, for its size and sha256.

    Raises:
        ZipRefused: damaged (CRC-32, compressed data or size).
    """
    with open(os.devnull, "wb") as sink:
        size, digest = copy_member(z, name, sink)
    return Streamed(name, {"size": size, "sha256": digest.hexdigest()})
