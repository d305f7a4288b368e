"""Figure builders: plain functions, data (lists of dicts from the API) in, ``go.Figure`` out.

They never talk to the network, so they are tested without a browser and reused for static
export. Traces carry ``meta`` dicts (``{"kind": "mean", "family": ...}``) so tests and the
browser suite can find them without relying on trace order.
"""

from dashboard.figures.common import esc, graph_config  # noqa: F401
