"""A bundle's manifest must agree with what the bundle holds (docs/DESIGN.md#bundles-read-as-hostile-input):
its row counts with the tables, its runs and suite with the runs table, its parts with the run
count, its weight and artifact counts with the members; and every id a row or entry refers to
must be in the bundle. A bundle cut short (an export that ran out of disk) or edited by hand is
refused before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["check_agreement"]

_WEIGHTS = re.compile(r"weights/([0-9a-f]{64})/")
_ARTIFACT = re.compile(r"artifacts/([0-9a-f]{64})\.safetensors")
_RESULTS = ("probe_results", "intervention_results", "patching_results", "result_weights")


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _tables(manifest: dict[str, Any], tables: dict[str, list[Any]], present: set[str]) -> list[str]:
    declared = manifest.get("tables")
    if declared is None:
        return []
    if not isinstance(declared, dict):
        return ["manifest.json: tables must be an object (table → its row count)"]
    out = []
    for name, entry in declared.items():
        rows = _count(entry.get("rows")) if isinstance(entry, dict) else None
        if rows is None:
            out.append(f"manifest.json: tables.{name}.rows must be a count")
        elif name in tables and len(tables[name]) != rows:
            held = len(tables[name]) if name in present else "no file"
            out.append(f"tables/{name}.json: the manifest says {rows} row(s), the bundle holds {held}")
    out += [f"tables/{t}.json: in the bundle but not in the manifest's tables" for t in sorted(present - set(declared))]
    return out


def _runs(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    out = []
    listed = manifest.get("runs")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(r, dict) for r in listed):
            return ["manifest.json: runs must be a list of objects"]
        if sorted(str(r.get("config_hash")) for r in listed) != sorted(str(r.get("config_hash")) for r in runs):
            out.append(
                f"manifest.json: runs lists {len(listed)} run(s) that are not the {len(runs)} of tables/runs.json "
                "(by config hash)"
            )
    suite = manifest.get("suite")
    other = next((r for r in runs if r.get("suite") != suite), None)
    if other is not None:
        out.append(
            f"tables/runs.json: run {other.get('id')} is of suite {other.get('suite')!r}, the manifest's is {suite!r}"
        )
    parts = manifest.get("parts")
    if parts is not None:
        counts = (
            [_count(p.get("runs")) if isinstance(p, dict) else None for p in parts]
            if isinstance(parts, list)
            else [None]
        )
        known = [c for c in counts if c is not None]
        if len(known) < len(counts):
            out.append("manifest.json: parts must be a list of objects, each with its run count")
        elif sum(known) < len(runs):
            out.append(f"manifest.json: parts count {sum(known)} run(s), tables/runs.json holds {len(runs)}")
    return out


def _members(manifest: dict[str, Any], tables: dict[str, list[Any]], names: Iterable[str]) -> list[str]:
    names = list(names)
    folders = sorted({m.group(1) for n in names if (m := _WEIGHTS.match(n))})
    named = {r.get("checkpoint_id") for r in tables.get("runs", [])}
    out = [f"weights/{c}/: no run of the bundle has this checkpoint" for c in folders if c not in named]
    included = manifest.get("weights_included")
    if included is not None and _count(included) != len(folders):
        out.append(f"manifest.json: weights_included says {included}, the bundle holds {len(folders)} checkpoint(s)")
    for entry in manifest.get("measuring") or []:
        ckpt = entry.get("weights") if isinstance(entry, dict) else None
        if ckpt and ckpt not in folders:
            out.append(
                f"manifest.json: measuring entry {entry.get('folder')!r} names weights/{ckpt}/, not in the bundle"
            )
    artifacts = sorted({m.group(1) for n in names if (m := _ARTIFACT.fullmatch(n))})
    referred = {r.get("artifact_id") for r in tables.get("result_weights", [])}
    out += [
        f"artifacts/{a}.safetensors: no row of tables/result_weights.json names it"
        for a in artifacts
        if a not in referred
    ]
    declared = manifest.get("artifacts_included")
    if declared is not None and _count(declared) != len(artifacts):
        out.append(f"manifest.json: artifacts_included says {declared}, the bundle holds {len(artifacts)}")
    return out


def _settings(tables: dict[str, list[Any]], present: set[str]) -> list[str]:
    if "measure_settings" not in present:  # bundles before schema 0003: settings_id imports as NULL
        return []
    ids = {r.get("id") for r in tables["measure_settings"]}
    for table in _RESULTS:
        for i, row in enumerate(tables.get(table, [])):
            if row.get("settings_id") is not None and row["settings_id"] not in ids:
                return [
                    f"tables/{table}.json: row {i}: settings_id {row['settings_id']} is not in tables/measure_settings.json"
                ]
    return []


def check_agreement(
    manifest: dict[str, Any], tables: dict[str, list[Any]], present: set[str], names: Iterable[str]
) -> list[str]:
    """The ways ``manifest`` disagrees with ``tables`` (parsed, by table name; rows already type-checked
    by ``backend.bundle_checks``), the table files ``present`` and the members ``names``, each
    naming its member; ``[]``: none."""
    return [
        *_tables(manifest, tables, present),
        *_runs(manifest, tables.get("runs", [])),
        *_members(manifest, tables, names),
        *_settings(tables, present),
    ]
