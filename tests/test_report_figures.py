"""`layerscope report` without kaleido (or with PNGs not written): one line says the figures were
skipped and why, and RESULTS.md links no image that does not exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from backend.bundle_export import export_bundle
from backend.report import build_report
from store.migrate import init_db
from store.session import make_engine, make_sessionmaker
from tests.conftest import seed_runs


@pytest.fixture
def bundle(tmp_path) -> Path:
    url = f"sqlite:///{tmp_path / 'src.db'}"
    init_db(url)
    factory = make_sessionmaker(make_engine(url))
    seed_runs(factory, families=("lstm", "transformer"), tasks=("parity",), seeds=(0, 1), suite="study")
    path = tmp_path / "study.zip"
    with factory() as s:
        export_bundle(s, "study", path)
    return path


def _links(md: Path) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md.read_text())


def test_report_without_kaleido_links_no_image_and_says_so(bundle, tmp_path, monkeypatch, capsys):
    from backend.cli import main

    monkeypatch.setitem(sys.modules, "kaleido", None)  # `import kaleido` fails: not installed
    out = tmp_path / "out" / "RESULTS.md"
    assert main(["report", str(bundle), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if "PNG figures skipped" in line]
    assert len(skipped) == 1 and "kaleido" in skipped[0] and "pip install -e '.[report]'" in skipped[0], err
    assert not list((tmp_path / "out").glob("figures/*.png"))
    assert _links(out) == []  # no link to a PNG that is not there
    assert "not rendered" in out.read_text()


def test_report_links_only_the_pngs_written(bundle, tmp_path, monkeypatch):
    import plotly.io as pio

    def write_first_only(figs, files, **kw):  # a renderer that wrote one file of several
        Path(files[0]).write_bytes(b"png")

    import kaleido  # noqa: F401 - the real module (a stand-in here would stay cached in plotly for later tests)

    monkeypatch.setattr(pio, "write_images", write_first_only)
    out = tmp_path / "docs" / "RESULTS.md"
    result = build_report(bundle, out)
    assert "not written" in result["figures_error"]
    written = {p.name for p in (tmp_path / "docs" / "figures").glob("*.png")}
    assert len(written) == 1
    links = _links(out)
    assert links and all((out.parent / link).is_file() for link in links), links
    assert "not rendered" in out.read_text()


def test_a_missing_chrome_is_named_as_such_not_as_a_missing_kaleido(monkeypatch, tmp_path):
    import plotly.graph_objects as go
    import plotly.io as pio

    from backend.report_figures import CHROME_MISSING, write_pngs

    def no_chrome(*args, **kw):  # kaleido's own words when it finds no browser
        raise RuntimeError("\n\nKaleido requires Google Chrome to be installed.\n\nEither download and install Chrome")

    monkeypatch.setattr(pio, "write_images", no_chrome)
    assert write_pngs({"a.png": go.Figure()}, tmp_path) == CHROME_MISSING


def test_a_legend_that_wraps_gets_room_above_the_plot_and_the_figure_is_not_changed():
    """The paper-steps curves (eight families) wrapped their legend to a second row over the title
    at the report's PNG width; the PNG copy gets one legend row of top margin per extra row."""
    import plotly.graph_objects as go

    from backend.report_figures import LEGEND_ROW_PX, room_for_legend

    def fig(n):
        f = go.Figure([go.Scatter(name=f"family {i}", x=[0], y=[0]) for i in range(n)])
        return f.update_layout(legend={"orientation": "h"}, margin={"t": 90})

    many, few = fig(8), fig(3)
    wrapped = room_for_legend(many).layout
    assert wrapped.legend.yref == "container" and wrapped.margin.t > 90 + LEGEND_ROW_PX
    assert room_for_legend(few).layout.margin.t == 90
    assert many.layout.margin.t == 90  # the caller's figure is left as it was


def test_behaviour_leaves_the_random_init_controls_out_and_marks_lines_with_untrained_runs():
    """The paper-steps report drew LSTM × parity at 75 %: the seeds' random-init controls (chance,
    0.5) were averaged into the trained runs (1.0). Controls are no run of the study; a line that
    includes untrained runs says so in the legend and is drawn dashed."""
    from dashboard.figures.behaviour import behaviour_rows, length_generalisation

    def run(family, seed, acc, *, trained=True, control=None):
        beh = {"40": {"token_acc": acc}, "60": {"token_acc": acc}}
        return {
            "task": "parity",
            "family": family,
            "seed": seed,
            "trained": trained,
            "control": control,
            "behaviour": beh,
        }

    runs = [
        run("lstm", 0, 1.0),
        run("lstm", 1, 1.0),
        run("lstm", 0, 0.5, trained=False, control="init"),
        run("lstm", 1, 0.5, trained=False, control="init"),
        run("transformer", 0, 0.99),
        run("transformer", 1, 0.40, trained=False),
    ]
    rows = {(r["family"], r["eval_length"]): r for r in behaviour_rows(runs)}
    assert rows["lstm", 40]["mean"] == 1.0 and rows["lstm", 40]["n"] == 2 and rows["lstm", 40]["untrained"] == 0
    assert rows["transformer", 40]["n"] == 2 and rows["transformer", 40]["untrained"] == 1
    fig = length_generalisation(list(rows.values()))
    means = {t.meta["family"]: t for t in fig.data if (t.meta or {}).get("kind") == "mean"}
    assert means["transformer"].name.endswith("(untrained: 1 of 2)") and means["transformer"].line.dash == "dash"
    assert "untrained" not in means["lstm"].name and means["lstm"].line.dash == "solid"


def test_a_figure_taller_than_the_png_default_is_exported_at_its_own_height():
    """The reversal matrix sizes itself to its rows × lines of text; squeezed into the default
    520 px its seven rows' text was drawn over each other in the paper-steps report."""
    import plotly.graph_objects as go

    from backend.report_figures import PNG_HEIGHT, png_height
    from dashboard.figures.reversal import reversal_matrix

    fams = ("transformer", "mamba", "mamba2", "lstm", "gru", "lstm_stack", "gru_stack")
    profiles = [
        {"task": "parity", "family": f, "profile_class": "early", "class_counts": {"early": 3}, "n": 3}
        | {"late_concentration": 0.1, "late_concentration_lo": 0.0, "late_concentration_hi": 0.2}
        for f in fams
    ]
    matrix = reversal_matrix(profiles)
    assert png_height(matrix) == matrix.layout.height > PNG_HEIGHT
    assert png_height(go.Figure().update_layout(height=300)) == PNG_HEIGHT


def test_a_registered_family_row_is_named_by_its_label():
    from dashboard.figures.rows import row_label

    assert row_label("gru_stack") == "GRU (stacked)" and row_label("lstm") == "LSTM"
    assert row_label("/models/tiny-gpt2/") == "tiny-gpt2"
