"""README.md's ``curl`` example of ``POST /api/jobs`` is a body the API takes: its JSON validated
by the same models the route validates with (``backend.api.routes.jobs.JobCreate``, one per kind
over ``worker.job_params``), its address the default one, and sent to the API it is a new job."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from pydantic import TypeAdapter

from backend.api.routes.jobs import JobCreate
from store.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"


def _example() -> list[str]:
    """The words of the README's one ``curl -X POST …/api/jobs`` command (line continuations joined)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "curl" in b and "/api/jobs" in b]
    command = block.replace("\\\n", " ").splitlines()[0]
    return shlex.split(command)


def _option(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words) if w == flag]


def test_the_readme_example_is_a_valid_job_body() -> None:
    words = _example()
    assert words[:3] == ["curl", "-X", "POST"]
    host, port = (Settings.model_fields[f].default for f in ("host", "port"))
    assert f"http://{host}:{port}/api/jobs" in words  # serve's default address
    assert "Content-Type: application/json" in _option(words, "-H")
    (data,) = _option(words, "-d")
    body = TypeAdapter(JobCreate).validate_python(json.loads(data))
    assert body.kind == "train" and body.params.family == "lstm"
    assert body.params.suite  # a run made without a suite is in no suite to export or compare (a fresh user's trap)


def test_the_api_takes_it(api) -> None:
    words = _example()
    headers = dict(h.split(": ", 1) for h in _option(words, "-H"))
    (data,) = _option(words, "-d")
    r = api.client.post("/api/jobs", content=data, headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == json.loads(data)["kind"] and len(api.queue.pending_ids()) == 1
