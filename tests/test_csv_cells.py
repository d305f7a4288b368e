"""The one CSV writer (layerscope_core.csv_cells): every CSV the product writes (the API's
/api/export/*.csv, the dashboard's downloads) defuses spreadsheet formulas the OWASP way."""

from __future__ import annotations

import io

import pandas as pd

from layerscope_core.csv_cells import FORMULA_STARTS, csv_safe, csv_text, formula_safe


def test_every_formula_start_is_quoted_and_nothing_else() -> None:
    assert FORMULA_STARTS == ("=", "+", "-", "@", "\t", "\r")
    for start in FORMULA_STARTS:
        assert formula_safe(start + "cmd()") == "'" + start + "cmd()"
    for ok in ("ok", "", " =x", "'=x", '["@SUM(1)"]'):
        assert formula_safe(ok) == ok
    assert formula_safe(-1.5) == -1.5 and formula_safe(None) is None


def test_csv_text_quotes_text_cells_and_keeps_numbers() -> None:
    df = pd.DataFrame({"name": ["=cmd()", "ok", "\tx", "\r@y", "a\nb"], "v": [-1.0, 2.0, 3.0, -4.0, 5.0]})
    back = pd.read_csv(io.StringIO(csv_text(df)))  # a CR or LF inside a cell keeps the row whole
    assert list(back["name"]) == ["'=cmd()", "ok", "'\tx", "'\r@y", "a\nb"]
    assert list(back["v"]) == [-1.0, 2.0, 3.0, -4.0, 5.0]
    assert list(df["name"]) == ["=cmd()", "ok", "\tx", "\r@y", "a\nb"]  # the caller's frame is not changed
    assert list(csv_safe(df)["name"]) == list(back["name"])
