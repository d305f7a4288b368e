"""Site names in TransformerLens's style, and their (site, layer) pairs in the results tables.

One naming scheme for every place a researcher names a point in the model (Python API, CLI,
REST, URL state); the tables keep integer layers (docs/SCIENCE.md#layers):

=========================  ==========================  ==========================================
name                       (site, layer) in the tables  what it is
=========================  ==========================  ==========================================
``embed``                  ("resid_post", -1)           the embedding output (``emb``), block 0's input
``blocks.{i}.resid_pre``   ("resid_pre", i)             the residual stream entering block i
``blocks.{i}.resid_post``  ("resid_post", i)            the residual stream leaving block i
``blocks.{i}.state``       ("state", i)                 block i's recurrent state (SSM / RNN)
``blocks.{i}.state.{p}``   ("state:{p}", i)             one part of it (``ssm``, ``conv``, ``h``, ``c``)
=========================  ==========================  ==========================================

``blocks.0.resid_pre`` and ``embed`` hold the same numbers, as do ``blocks.{i}.resid_pre`` and
``blocks.{i-1}.resid_post`` (TransformerLens names both too). Imports nothing from the project.

>>> parse_site("blocks.3.resid_post")
('resid_post', 3)
>>> site_name("resid_post", -1)
'embed'
"""

from __future__ import annotations

import re

EMBED = "embed"
_BLOCK_RE = re.compile(r"^blocks\.(\d+)\.(resid_pre|resid_post|state)(?:\.([a-z]+))?$")


def site_name(site: str, layer: int) -> str:
    """The TransformerLens-style name of a table's (site, layer).

    Raises:
        ValueError: an unknown site, or a layer outside what the site allows (only
            ``resid_post`` has layer -1, i.e. ``embed``).
    """
    base, _, part = site.partition(":")
    if base not in ("resid_pre", "resid_post", "state") or (part and base != "state"):
        raise ValueError(f"unknown site {site!r}; expected resid_pre, resid_post, state or state:<part>")
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"layer must be an int, got {layer!r}")
    if base == "resid_post" and layer == -1:
        return EMBED
    if layer < 0:
        raise ValueError(f"site {site!r} has no layer {layer} (only resid_post has -1, named {EMBED!r})")
    return f"blocks.{layer}.{base}" + (f".{part}" if part else "")


def parse_site(name: str, n_layers: int | None = None) -> tuple[str, int]:
    """(site, layer) of a TransformerLens-style name (see the module table).

    Args:
        name: ``embed`` or ``blocks.{i}.{resid_pre|resid_post|state}[.{part}]``.
        n_layers: when given, ``i`` must be below it.

    Raises:
        ValueError: a name outside the scheme, or a block index past the last block.
    """
    if name == EMBED:
        return "resid_post", -1
    m = _BLOCK_RE.match(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(
            f"unknown site name {name!r}; expected 'embed' or 'blocks.<i>.resid_pre', "
            "'blocks.<i>.resid_post', 'blocks.<i>.state' or 'blocks.<i>.state.<part>'"
        )
    layer, base, part = int(m.group(1)), m.group(2), m.group(3)
    if part and base != "state":
        raise ValueError(f"site name {name!r}: only a state has parts")
    if n_layers is not None and layer >= n_layers:
        raise ValueError(f"site name {name!r}: block {layer} is past the last block ({n_layers - 1})")
    return (f"state:{part}" if part else base), layer


def residual_layer(name: str, n_layers: int | None = None) -> int:
    """The residual-stream layer id (-1 = emb) a ``resid_*`` / ``embed`` name reads:
    ``blocks.{i}.resid_pre`` → i - 1, ``blocks.{i}.resid_post`` → i, ``embed`` → -1.

    Raises:
        ValueError: a bad name, or a state name (not a residual-stream site).
    """
    site, layer = parse_site(name, n_layers)
    if site == "resid_pre":
        return layer - 1
    if site == "resid_post":
        return layer
    raise ValueError(f"site name {name!r} is a recurrent state, not the residual stream")


def all_site_names(n_layers: int, state_parts: tuple[str, ...] = ()) -> list[str]:
    """Every name of a model of ``n_layers`` blocks (state names only when it has ``state_parts``)."""
    out = [EMBED]
    for i in range(n_layers):
        out += [f"blocks.{i}.resid_pre", f"blocks.{i}.resid_post"]
        if state_parts:
            out += [f"blocks.{i}.state", *(f"blocks.{i}.state.{p}" for p in state_parts)]
    return out


__all__ = ["EMBED", "all_site_names", "parse_site", "residual_layer", "site_name"]
