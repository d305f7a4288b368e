"""docs/BRING_YOUR_OWN.md runs as written: its ``python`` blocks in one namespace and its
``$ layerscope`` lines through the CLI, in a temp folder with its own results DB and store."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from sqlalchemy import select

DOC = Path(__file__).resolve().parents[1] / "docs" / "BRING_YOUR_OWN.md"


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


@pytest.fixture(autouse=True)
def fresh_settings():
    """Settings are cached per process: read them afresh after this test's env changes."""
    from store.settings import get_settings

    yield
    get_settings.cache_clear()


def test_worked_examples_run(tmp_path, monkeypatch, capsys):
    from backend.cli import main
    from store.settings import get_settings

    for k, v in {
        "LAYERSCOPE_HOME": tmp_path / "home",
        "LAYERSCOPE_DB_URL": f"sqlite:///{tmp_path / 'r.db'}",
        "LAYERSCOPE_QUEUE_URL": f"sqlite:///{tmp_path / 'q.db'}",
        "LAYERSCOPE_STORE_DIR": tmp_path / "store",
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(k, str(v))
    get_settings.cache_clear()
    monkeypatch.chdir(tmp_path)
    _an_imported_run_without_weights(tmp_path)  # as after `make demo`: run 1 cannot be exported
    found = blocks(DOC.read_text())
    assert [lang for lang, _ in found].count("python") == 3 and [lang for lang, _ in found].count("console") == 2
    ns: dict = {}
    commands = 0
    run_id = None  # the id the last suite printed: what RUN_ID stands for in the doc
    for lang, body in found:
        if lang == "python":
            exec(compile(body, str(DOC), "exec"), ns)
        elif lang == "console":
            for line in body.splitlines():
                if line.startswith("$ layerscope "):
                    if "RUN_ID" in line:
                        assert run_id is not None, f"{line}: no command before it printed a run id"
                    rc = main(shlex.split(line.replace("RUN_ID", str(run_id)))[2:])
                    out = capsys.readouterr()
                    assert rc == 0, (line, out.err)
                    printed = re.search(r"stored run id (\d+)", out.out)
                    run_id = int(printed.group(1)) if printed else run_id
                    commands += 1
    assert commands == 6 and run_id not in (None, 1)
    assert (tmp_path / "tiny-llama-parity" / "config.json").is_file()
    assert (tmp_path / "activations.safetensors").is_file()
    from store.models import PatchingResult, Run
    from store.session import make_engine, make_sessionmaker

    with make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'r.db'}"))() as s:
        runs = {r.suite: r for r in s.scalars(select(Run))}
        assert set(runs) == {"paper", "byo_model", "byo_scratch", "byo_data"}
        assert all(r.status == "complete" for suite, r in runs.items() if suite != "paper")
        folder = str((tmp_path / "tiny-llama").resolve())  # stored absolute: a worker runs elsewhere
        assert runs["byo_model"].pretrained == folder and runs["byo_data"].task == "my_parity"
        scratch = runs["byo_scratch"]
        assert scratch.pretrained is None and scratch.train_config["from_config"] == folder
        assert s.scalars(select(PatchingResult).where(PatchingResult.run_id == runs["byo_data"].id)).first()


def _an_imported_run_without_weights(tmp_path: Path) -> None:
    """Run 1 in the results DB, as `make demo` leaves it: an imported random-init control without
    weights (``export-model 1`` fails on it)."""
    from backend.core.startup import open_database
    from store.models import Run
    from store.session import make_engine, make_sessionmaker
    from store.settings import get_settings

    open_database(get_settings())
    with make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'r.db'}"))() as s:
        s.add(
            Run(
                id=1,
                name="imported control",
                task="parity",
                family="lstm",
                seed=0,
                suite="paper",
                control="init",
                n_layers=2,
                d_model=8,
                n_params=1,
                config_hash="0" * 64,
                status="complete",
            )
        )
        s.commit()
