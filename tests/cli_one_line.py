"""Run the console entry point (``backend.cli.main``: the one-line error handling) under typer's
CliRunner isolation, and check that a refusal is one line with no traceback."""

from __future__ import annotations

from typer.testing import CliRunner

from backend.cli import main


def run_cli(args: list[str], input: str | None = None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``layerscope ARGS``."""
    with CliRunner().isolation(input=input) as (out, err, _):
        rc = main(args)
        return rc, out.getvalue().decode(), err.getvalue().decode()


def assert_one_line_error(args: list[str], said: str, rc: int = 1) -> str:
    """``layerscope ARGS`` exits ``rc`` with no traceback and one ``layerscope: error:`` line
    holding ``said`` (progress lines before it, \\r-separated, are allowed); that line."""
    got, out, err = run_cli(args)
    assert "Traceback" not in out + err, err
    errors = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("layerscope: error: ")]
    assert got == rc and len(errors) == 1 and said in errors[0], (got, err)
    assert err.rstrip().endswith(errors[0])  # the last thing said
    return errors[0]
