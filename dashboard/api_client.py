"""The dashboard's only way to the data: the backend's HTTP API (docs/DESIGN.md).

Never imports ``backend`` or the DB. One ``ApiClient`` per Dash app; httpx's client is
thread-safe, so Dash callbacks running in a WSGI thread pool share it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode

import httpx

log = logging.getLogger(__name__)

# Seconds between the retries of a GET answered 503 with Retry-After (the heavy-route limit):
# a page asking while others export waits briefly instead of showing "server busy".
BUSY_RETRY_WAITS = (0.5, 1.0, 2.0)


# httpx's limit on a URL component (the query): a longer one raises InvalidURL before any request
MAX_QUERY_CHARS = 65_536


class ApiError(RuntimeError):
    """A non-2xx answer (or no answer) from the API; ``detail`` is the server's message."""

    def __init__(self, status: int, detail: Any, url: str = ""):
        self.status = status
        self.detail = detail
        self.url = url
        super().__init__(f"{status} {url}: {detail}")

    @property
    def message(self) -> str:
        if isinstance(self.detail, str):
            return self.detail
        if isinstance(self.detail, list):
            return "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg', '')}"
                if isinstance(d, dict)
                else str(d)
                for d in self.detail
            )
        return str(self.detail)


def _clean(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Drop empty values; lists become repeated keys."""
    out: list[tuple[str, Any]] = []
    for k, v in params.items():
        if v is None or v == "" or v == []:
            continue
        if isinstance(v, (list, tuple, set)):
            out.extend((k, x) for x in v)
        elif isinstance(v, bool):
            out.append((k, "true" if v else "false"))
        else:
            out.append((k, v))
    return out


class ApiClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers, transport=transport)

    # -- plumbing -------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        query = _clean(params or {})
        if (size := len(urlencode(query))) >= MAX_QUERY_CHARS:  # httpx refuses it (InvalidURL): say why instead
            longest = max(len(str(v)) for _, v in query)
            raise ApiError(
                414,
                f"the request's query is {size} characters, over the {MAX_QUERY_CHARS - 1} a URL may hold "
                f"(its longest value has {longest}): shorten the page's address or the value given",
                path,
            )
        for wait in (*BUSY_RETRY_WAITS, None):
            try:
                resp = self._http.request(method, path, params=query, json=json, headers=headers)
            except httpx.HTTPError as exc:
                raise ApiError(503, f"API not reachable at {self.base_url}: {exc}", path) from exc
            # a read the server shed (too many exports / aggregates at once): wait and ask again
            if wait is None or method != "GET" or resp.status_code != 503 or "retry-after" not in resp.headers:
                break
            time.sleep(wait)
        if resp.status_code >= 400:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            raise ApiError(resp.status_code, detail, path)
        if resp.status_code == 204 or not resp.content:
            return None
        return resp.json()

    def get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self._request("POST", path, json=body)

    def close(self) -> None:
        self._http.close()

    # -- endpoints --------------------------------------------------------------------------
    def meta(self) -> dict:
        """``GET /api/meta``: families, tasks (built-in, plugin, file), methods, presets, ..."""
        return self.get("/api/meta")

    def health(self) -> dict:
        return self.get("/api/health")

    def runs(
        self, *, task=None, family=None, seed=None, suite=None, limit: int = 50, offset: int = 0, **extra: Any
    ) -> dict:
        return self.get(
            "/api/runs", task=task, family=family, seed=seed, suite=suite, limit=limit, offset=offset, **extra
        )

    def all_runs(self, *, limit: int = 500, **filters: Any) -> list[dict]:
        """Every run matching ``filters`` (paged through), at most ``limit``."""
        out: list[dict] = []
        offset = 0
        while len(out) < limit:
            page = self.runs(limit=min(1000, limit - len(out)), offset=offset, **filters)
            items = page.get("items", [])
            out.extend(items)
            offset += len(items)
            if not items or offset >= page.get("total", 0):
                break
        return out

    def run(self, run_id: int) -> dict:
        return self.get(f"/api/runs/{int(run_id)}")

    def run_probes(self, run_id: int, eval_length: int | None = None) -> list[dict]:
        return self.get(f"/api/runs/{int(run_id)}/probes", eval_length=eval_length)

    def run_interventions(self, run_id: int, eval_length: int | None = None, method: str | None = None) -> list[dict]:
        return self.get(f"/api/runs/{int(run_id)}/interventions", eval_length=eval_length, method=method)

    def run_patching(self, run_id: int, eval_length: int | None = None, site: str | None = None) -> list[dict]:
        return self.get(f"/api/runs/{int(run_id)}/patching", eval_length=eval_length, site=site)

    def run_weights(self, run_id: int) -> list[dict]:
        """``GET /api/runs/{id}/weights``: the run's kept probe weights and removed directions."""
        return self.get(f"/api/runs/{run_id}/weights")

    def suites(self) -> list[dict]:
        """``GET /api/suites``: name, run counts, and whether the suite was imported from a bundle."""
        return self.get("/api/suites")

    def curves(self, *, task=None, family=None, eval_length=None, suite=None, **extra: Any) -> list[dict]:
        return self.get("/api/curves", task=task, family=family, eval_length=eval_length, suite=suite, **extra)

    def profiles(self, *, task=None, family=None, eval_length=None, suite=None, **extra: Any) -> list[dict]:
        return self.get("/api/profiles", task=task, family=family, eval_length=eval_length, suite=suite, **extra)

    def claims(self, suite: str | None = None) -> list[dict]:
        return self.get("/api/claims", suite=suite)

    def jobs(self, *, limit: int = 50, offset: int = 0, **filters: Any) -> dict:
        return self.get("/api/jobs", limit=limit, offset=offset, **filters)

    def job(self, job_id: int) -> dict:
        return self.get(f"/api/jobs/{int(job_id)}")

    def create_job(self, kind: str, params: dict, idempotency_key: str | None = None) -> dict:
        """``POST /api/jobs``; the same ``idempotency_key`` again answers the first job."""
        if idempotency_key:
            return self._request(
                "POST", "/api/jobs", json={"kind": kind, "params": params}, headers={"Idempotency-Key": idempotency_key}
            )
        return self.post("/api/jobs", {"kind": kind, "params": params})

    def cancel_job(self, job_id: int) -> dict:
        return self.post(f"/api/jobs/{int(job_id)}/cancel")

    def retry_job(self, job_id: int) -> dict:
        return self.post(f"/api/jobs/{int(job_id)}/retry")

    def create_view(self, title: str, page: str, state: dict) -> dict:
        return self.post("/api/views", {"title": title, "page": page, "state": state})

    def view(self, slug: str) -> dict:
        return self.get(f"/api/views/{quote(slug, safe='')}")

    def views(self) -> list[dict]:
        return self.get("/api/views")

    def delete_view(self, slug: str) -> dict:
        return self._request("DELETE", f"/api/views/{quote(slug, safe='')}")

    def annotate_run(self, run_id: int, *, tags: list[str] | None = None, notes: str | None = None) -> dict:
        body = {k: v for k, v in (("tags", tags), ("notes", notes)) if v is not None}
        return self._request("PATCH", f"/api/runs/{int(run_id)}", json=body)

    def rebuild_weights(self, run_id: int, then: dict | None = None) -> dict:
        """Queue the rebuild of a run's weights (results kept); ``then``: ``{"kind", "params"}`` of
        a job on the run queued once its weights are there."""
        return self.post(f"/api/runs/{int(run_id)}/rebuild-weights", {"then": then} if then else None)

    def export(self, resource: str, fmt: str = "json", **params: Any) -> Any:
        return self.get(f"/api/export/{resource}.{fmt}", **params)

    # -- composites used by pages -----------------------------------------------------------
    def probes_for_runs(self, runs: Iterable[dict], eval_length: int | None = None) -> list[dict]:
        """Probe rows of several runs, each tagged with the run's task/family/seed/n_layers."""
        out: list[dict] = []
        for run in runs:
            for row in self.run_probes(run["id"], eval_length=eval_length):
                out.append(
                    {
                        **row,
                        "task": run["task"],
                        "family": run["family"],
                        "seed": run["seed"],
                        "n_layers": run["n_layers"],
                        "run_name": run.get("name"),
                    }
                )
        return out
