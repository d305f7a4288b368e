"""Python source → the token strings of the ``code_depth`` task (stdlib ``tokenize``).

Mapping of ``tokenize`` tokens to task tokens ("keys"):

- ``OP`` and ``NAME`` (keywords and identifiers alike): the exact token string;
- ``NUMBER`` → ``<num>``; ``STRING`` → ``<str>``;
- an f-string (or t-string) is ONE ``<str>`` token on every Python version: on 3.11
  ``tokenize`` yields it as a single ``STRING``; on 3.12+ it yields ``FSTRING_START`` …
  ``FSTRING_END`` with the replacement fields' ``OP`` tokens in between, and those are folded
  into the one ``<str>``. So brackets inside replacement fields never count, like brackets
  in any other string;
- ``NEWLINE`` (end of a logical line) → ``<newline>``, ``INDENT`` → ``<indent>``,
  ``DEDENT`` → ``<dedent>``;
- ``COMMENT``, ``NL`` (non-logical line breaks, so also line continuations and breaks
  inside brackets), ``ENCODING`` and ``ENDMARKER`` are dropped.

Any ``tokenize`` error (unterminated string, an unterminated bracket at end of file —
"EOF in multi-line statement" —, inconsistent dedent, ``ERRORTOKEN``, undecodable bytes)
raises :class:`CodeLexError`; the corpus loader skips such files and counts them.
"""

from __future__ import annotations

import io
import tokenize

NUM, STR, NEWLINE, INDENT, DEDENT, UNK = "<num>", "<str>", "<newline>", "<indent>", "<dedent>", "<unk>"
OPEN_BRACKETS = ("(", "[", "{")
CLOSE_BRACKETS = (")", "]", "}")
# Tokens every vocabulary holds, in this id order (ids 0..11).
SPECIAL_KEYS: tuple[str, ...] = (UNK, NEWLINE, INDENT, DEDENT, NUM, STR) + OPEN_BRACKETS + CLOSE_BRACKETS

_DROP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_SIMPLE = {
    tokenize.NUMBER: NUM,
    tokenize.STRING: STR,
    tokenize.NEWLINE: NEWLINE,
    tokenize.INDENT: INDENT,
    tokenize.DEDENT: DEDENT,
}
# 3.12+ f-strings, 3.14+ t-strings; absent names are simply not present on older versions.
_STR_START = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_STR_END = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}


class CodeLexError(ValueError):
    """The source could not be tokenised; the message says why."""


def lex_source(source: str | bytes) -> list[str]:
    """Task token strings of one Python source (see the module docstring).

    Args:
        source: text, or bytes decoded per PEP 263 (coding cookie / BOM, else UTF-8).

    Returns:
        The keys in source order, e.g. ``["x", "=", "(", "<num>", ")", "<newline>"]``.

    Raises:
        CodeLexError: when ``tokenize`` fails or yields an ``ERRORTOKEN``.
    """
    try:
        if isinstance(source, bytes):
            tokens = tokenize.tokenize(io.BytesIO(source).readline)
        else:
            tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return _keys(tokens)
    except CodeLexError:
        raise
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, LookupError) as err:
        raise CodeLexError(f"{type(err).__name__}: {err}") from err


def _keys(tokens) -> list[str]:  # a tokenize generator
    keys: list[str] = []
    in_string = 0  # nesting of f-/t-strings (3.12+ only)
    for tok in tokens:
        kind = tok.type
        if in_string:
            in_string += (kind in _STR_START) - (kind in _STR_END)
            if not in_string:
                keys.append(STR)
        elif kind in _STR_START:
            in_string = 1
        elif kind in (tokenize.OP, tokenize.NAME):
            keys.append(tok.string)
        elif kind in _SIMPLE:
            keys.append(_SIMPLE[kind])
        elif kind in _DROP:
            continue
        elif kind == tokenize.ERRORTOKEN:
            raise CodeLexError(f"error token {tok.string!r} at line {tok.start[0]}")
        else:
            raise CodeLexError(f"unexpected token type {tokenize.tok_name.get(kind, kind)} at line {tok.start[0]}")
    return keys
