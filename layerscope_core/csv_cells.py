"""The one CSV writer: text cells safe to open in a spreadsheet.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a formula
by Excel, LibreOffice and Google Sheets (CSV injection). As OWASP recommends, such a text cell gets
a leading single quote; numbers, and text starting with anything else, are written as they are.
User-typed names, tags and notes reach every CSV the product writes (``/api/export/*.csv``, the
dashboard's downloads), so all of them go through :func:`csv_text`.

Web-free and torch-free: the API and the dashboard share it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(value: Any) -> Any:
    """``value`` with a leading ``'`` when it is text a spreadsheet would read as a formula."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with every text cell passed through :func:`formula_safe`."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object or pd.api.types.is_string_dtype(df[c]):
            df[c] = df[c].map(formula_safe)
    return df


def csv_text(df: pd.DataFrame) -> str:
    """``df`` as CSV text (no index), its text cells defused (:func:`csv_safe`). Lines end in CRLF
    (RFC 4180), so a cell holding a CR or LF (a value stored before the text rule) is quoted and
    stays one cell rather than breaking the row."""
    return csv_safe(df).to_csv(index=False, lineterminator="\r\n")
