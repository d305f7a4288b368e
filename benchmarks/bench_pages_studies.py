"""First server response of every dashboard page with both shipped studies imported.

Imports ``examples/paper-steps.layerscope.zip`` and ``examples/paper.layerscope.zip`` into a
temporary SQLite DB (every ``LAYERSCOPE_*`` path in a temporary folder), starts
``layerscope serve`` and visits each page cold (server caches empty, one visit each) in headless
Chromium (Playwright). Per page it prints:

- *first response* = ms from navigation start until the first byte of the page's HTML
  (Navigation Timing ``responseStart``): the server's first answer;
- *figure drawn* = ms from navigation start until the page's main figure / table shows its data
  and no Dash callback is loading;
- *slowest callback* = the longest server time (``responseStart - requestStart``) of one
  ``_dash-update-component`` request during that visit: the callback that draws the figure;
- *server CPU* = CPU time (user + system) the server process and its children spent during the
  visit (psutil): what the page costs the server, which machine load does not stretch as it
  stretches the wall times above.

The target is ≤ 1 s for the first response and the figure callback; the printed
``floor`` is the first response of ``/api/health`` measured in the same run, so machine load shows
on both sides.

``layerscope serve`` warms itself once it answers (``dashboard/warm.py``: each page's first draw
runs once, filling the API's result cache); the visits start when its log says the warm-up ended
(the time it took is printed), as a visitor arriving after it would. ``--no-warm`` serves without
the warm-up: every visit then pays its aggregates cold.

    python benchmarks/bench_pages_studies.py [--no-warm] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_dashboard import LOADING, plot_ready  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, Server, layerscope_cmd, server_env  # noqa: E402

BUNDLES = [ROOT / "examples" / "paper-steps.layerscope.zip", ROOT / "examples" / "paper.layerscope.zip"]
PAGES = [
    ("/", f"document.querySelectorAll('#rn-grid .ag-row').length > 0 && {LOADING}"),
    ("/curves", plot_ready("cv-graph")),
    ("/reversal", plot_ready("rv-matrix")),
    ("/probe-vs-causal", plot_ready("pc-heatmap")),
    ("/patching", plot_ready("pt-graph")),
    ("/claims", f"document.querySelectorAll('.claim-card').length > 0 && {LOADING}"),
    ("/jobs", f"!!document.querySelector('.jobs-table') && {LOADING}"),
    ("/views", f"!!document.querySelector('#vw-list *') && {LOADING}"),
]
CALLBACKS_JS = """() => performance.getEntriesByType('resource')
  .filter(e => e.name.includes('_dash-update-component'))
  .map(e => e.responseStart - e.requestStart)"""
NAV_JS = "() => performance.getEntriesByType('navigation')[0].responseStart"


def import_bundles(tmp: Path, url: str) -> float:
    """Import both study bundles with ``layerscope import``; seconds taken."""
    env = server_env(tmp, url)
    t = time.perf_counter()
    for b in BUNDLES:
        subprocess.run([*layerscope_cmd(), "import", str(b)], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def wait_warm(log: Path, timeout_s: float = 600.0) -> float:
    """Seconds until the server's log says its warm-up ended (``dashboard.warm``).

    Raises:
        RuntimeError: no such line within ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if re.search(r"warm-up: \d+ first draws|warm-up skipped", log.read_text()):
            return time.monotonic() - t0
        time.sleep(0.2)
    raise RuntimeError(f"no warm-up line in {log} after {timeout_s:.0f} s")


def cpu_ms(proc: psutil.Process) -> float:
    """CPU ms (user + system) used so far by ``proc`` and its living children."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total * 1000


def visit(page, base: str, path: str, ready: str, server: psutil.Process) -> tuple[float, float, float, float]:
    """(first response ms, figure drawn ms, slowest callback ms, server CPU ms) of one cold visit."""
    cpu0 = cpu_ms(server)
    page.goto(base + path, wait_until="commit")
    try:
        page.wait_for_function(ready, timeout=120_000, polling=50)
        drawn = page.evaluate("performance.now()")
    except Exception:  # noqa: BLE001 — a page that never draws is reported, not fatal
        drawn = float("nan")
    callbacks = page.evaluate(CALLBACKS_JS) or [0.0]
    return page.evaluate(NAV_JS), drawn, max(callbacks), cpu_ms(server) - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    ap.add_argument("--no-warm", action="store_true", help="serve with --no-warm: every page visited cold")
    ap.add_argument(
        "--db", type=Path, default=None, help="a SQLite file with both studies imported (copied; not imported again)"
    )
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="ls-bench-studies-"))
    url = f"sqlite:///{tmp / 'layerscope.db'}"
    if args.db:
        shutil.copyfile(args.db, tmp / "layerscope.db")
    else:
        print(f"imported both studies in {import_bundles(tmp, url):.1f} s", flush=True)
    server = Server(tmp, url, None, ["--no-warm"] if args.no_warm else [])
    try:
        warm = None if args.no_warm else wait_warm(tmp / "serve.log")
        t = time.perf_counter()
        httpx.get(server.base + "/api/health", timeout=60)
        floor = (time.perf_counter() - t) * 1000
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
            proc = psutil.Process(server.proc.pid)
            rows = [(path, *visit(page, server.base, path, ready, proc)) for path, ready in PAGES]
            browser.close()
    finally:
        server.stop()
    load = os.getloadavg()
    lines = [
        ("served cold (--no-warm)" if warm is None else f"warm-up ended {warm:.1f} s after the server answered")
        + f"; floor (/api/health): {floor:.0f} ms; {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f}"
        f" / {load[2]:.1f}",
        "",
        "| page | first response (ms) | figure drawn (ms) | slowest callback (ms) | server CPU (ms) |",
        "|---|---:|---:|---:|---:|",
        *[f"| `{p}` | {r:,.0f} | {d:,.0f} | {c:,.0f} | {u:,.0f} |" for p, r, d, c, u in rows],
    ]
    print("\n".join(lines), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
