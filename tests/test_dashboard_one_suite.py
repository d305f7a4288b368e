"""/probe-vs-causal and /patching show one suite too (the same default rule as /curves): their
run lists and the cross-run summary ask the API for one suite, never every suite pooled."""

from __future__ import annotations

from dashboard.pages import patching, probe_causal


class Api:
    def __init__(self):
        self.asked = []

    def suites(self):
        return [{"name": "paper", "n_runs": 60}, {"name": "quick", "n_runs": 15}]

    def runs(self, **kw):
        self.asked.append(("runs", kw.get("suite")))
        return {"items": [], "total": 0}

    def all_runs(self, *, limit=500, **kw):
        return self.runs(**kw)["items"]

    def export(self, resource, fmt, **kw):
        self.asked.append((resource, kw.get("suite")))
        return []


def test_probe_vs_causal_reads_one_suite() -> None:
    api = Api()
    probe_causal.run_options(api, probe_causal.SPEC.decode(""))
    probe_causal.summary_points(api, probe_causal.SPEC.decode(""))
    # the last: the suite's runs, for the cells not learned that claim 4 leaves out too
    assert api.asked == [("runs", "paper"), ("probes", "paper"), ("interventions", "paper"), ("runs", "paper")]
    api.asked.clear()
    probe_causal.run_options(api, probe_causal.SPEC.decode("?suite=quick"))
    assert api.asked == [("runs", "quick")]
    assert "suite=quick" in probe_causal.SPEC.encode(probe_causal.SPEC.decode("?suite=quick"))


def test_patching_reads_one_suite() -> None:
    api = Api()
    patching.candidate_runs(api, patching.SPEC.decode(""))
    patching.run_options(api, None, None, [], suite="quick")
    assert api.asked == [("runs", "paper"), ("runs", "quick")]


def test_an_empty_default_suite_is_shown_empty_not_replaced_by_another() -> None:
    """Fresh user: the default suite ('paper', most runs) had no trained runs; /curves named it in
    the picker but drew 'quick' under it. The rows shown are the default suite's, even none."""
    from dashboard.suites import one_suite, suite_placeholder

    api = Api()
    only_quick = [{"suite": "quick", "layer": 0}, {"suite": "quick", "layer": 1}]
    assert suite_placeholder(api) == "paper (shown by default)"
    assert one_suite(api, only_quick, None) == []
    both = [*only_quick, {"suite": "paper", "layer": 0}]
    assert one_suite(api, both, None) == [{"suite": "paper", "layer": 0}]
    assert one_suite(api, only_quick, "quick") == only_quick  # a chosen suite: as asked
