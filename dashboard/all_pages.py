"""Every page of the dashboard, in the navigation's order (``dashboard.app`` routes over them)."""

from __future__ import annotations

from dashboard.pages import PageDef, claims, curves, jobs, patching, probe_causal, reversal, runs, views

PAGES: list[PageDef] = [
    runs.PAGE,
    curves.PAGE,
    reversal.PAGE,
    probe_causal.PAGE,
    patching.PAGE,
    claims.PAGE,
    jobs.PAGE,
    views.PAGE,
]
