"""Shared by the resume tests (tests/test_train_resume.py, tests/test_in_flight_*.py): a kill
between two training steps, the check that a resumed run is the run that never stopped, a
machine of its own for the CLI, and a training state left as a killed run leaves one."""

from __future__ import annotations

from pathlib import Path

import torch

from science.context import JobCancelled, SilentContext


class CancelAt(SilentContext):
    """Cancels at the ``n``-th step (a kill between two steps, as far as the loop can tell)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.seen, self.lines = n, 0, []

    def check_cancelled(self) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise JobCancelled("killed")

    def log(self, line: str) -> None:
        self.lines.append(line)


def assert_resumed_equals_unbroken(resumed_env, resumed_id: int, unbroken_env, unbroken_id: int, at: list[int]) -> None:
    """The stored runs are the same model: equal weights, steps, held-out accuracy and loss curve;
    the resumed one records the steps it resumed at (``at``), the unbroken one none."""
    from store.models import Run
    from worker.pipeline import load_run

    (_, _, got), (_, _, want) = load_run(resumed_id, resumed_env), load_run(unbroken_id, unbroken_env)
    for name, tensor in want.state_dict().items():
        assert torch.equal(tensor, got.state_dict()[name]), name
    with resumed_env.session_factory() as s, unbroken_env.session_factory() as t:
        a, b = s.get(Run, resumed_id), t.get(Run, unbroken_id)
        assert a.made_with["resumed_at_steps"] == at
        assert [t["from_step"] for t in a.made_with["trained_on"]] == [0, *at]  # where each attempt ran
        assert all(t["device"].startswith("cpu on ") for t in a.made_with["trained_on"])
        assert "resumed_at_steps" not in b.made_with and "trained_on" not in b.made_with
        assert (a.steps, a.heldout_acc, a.loss_curve) == (b.steps, b.heldout_acc, b.loss_curve)


def use_machine(monkeypatch, root):
    """The CLI's settings pointed at a machine of its own under ``root`` (home, results DB, queue,
    model store); its :class:`worker.env.WorkerEnv` on the CPU."""
    from store.settings import get_settings
    from worker.pipeline import local_env

    for var, value in (
        ("LAYERSCOPE_HOME", root / "home"),
        ("LAYERSCOPE_DB_URL", f"sqlite:///{root / 'results.db'}"),
        ("LAYERSCOPE_QUEUE_URL", f"sqlite:///{root / 'queue.db'}"),
        ("LAYERSCOPE_STORE_DIR", root / "store"),
    ):
        monkeypatch.setenv(var, str(value))
    get_settings.cache_clear()
    return local_env(device="cpu")


def fake_state(env, params, blob: bytes = b"a training state") -> Path:
    """A training state of run ``params`` left in ``env``'s store as a killed run leaves one (the
    checkpoint file, here ``blob``, and its note): for what reads the files without resuming them."""
    from worker import in_flight
    from worker.pipeline import training_checkpoint

    ckpt = training_checkpoint(params, env)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    ckpt.write_bytes(blob)
    in_flight.write_note(ckpt, params)
    return ckpt
