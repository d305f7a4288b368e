"""Mid-run training checkpoints (science/train_checkpoint.py, docs/SCIENCE.md#resuming-training):
a run killed part-way and resumed from its checkpoint ends with the weights, loss curve and stop of
a run that never stopped."""

from __future__ import annotations

import pytest
import torch

from models_store import ModelConfig, build_model
from science.context import JobCancelled
from science.tasks import get_task
from science.train_checkpoint import CheckpointMismatch, CheckpointUnreadable
from science.training import TrainConfig, train_model
from tests.resume_helpers import CancelAt, assert_resumed_equals_unbroken

# A curriculum that moves (threshold 0.55), evaluations every 25 steps, data blocks of 25.
CONFIG = TrainConfig(
    train_length=16,
    batch_size=16,
    max_steps=160,
    eval_every=25,
    n_eval_sequences=64,
    warmup_steps=10,
    curriculum_start=8,
    curriculum_step=4,
    curriculum_threshold=0.55,
)


def fresh_model(task):
    torch.manual_seed(0)
    return build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, d_model=24, n_layers=2)
    )


def test_resumed_run_equals_unbroken_run(tmp_path):
    task = get_task("parity")
    unbroken = fresh_model(task)
    want = train_model(unbroken, task, CONFIG, seed=1)
    assert any("length" in p for p in want.loss_curve), "the curriculum must be exercised"

    ckpt = tmp_path / "run.pt"
    first = fresh_model(task)
    with pytest.raises(JobCancelled):
        train_model(first, task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=50, ctx=CancelAt(123))
    assert ckpt.exists()  # written at step 100, the last multiple of 50 before the kill at 123

    ctx = CancelAt(10**9)
    resumed_model = fresh_model(task)
    got = train_model(resumed_model, task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=50, ctx=ctx)
    assert got.resumed_at == [100]
    assert any("resumed from the checkpoint at step 100" in line for line in ctx.lines)
    for name, tensor in unbroken.state_dict().items():
        assert torch.equal(tensor, resumed_model.state_dict()[name]), name
    assert got.loss_curve == want.loss_curve
    assert (got.steps, got.stop_reason, got.final_heldout_acc, got.best_step, got.stop_length) == (
        want.steps,
        want.stop_reason,
        want.final_heldout_acc,
        want.best_step,
        want.stop_length,
    )
    assert not ckpt.exists()  # removed when the run ends


def test_a_run_resumed_elsewhere_records_where_each_attempt_ran(tmp_path):
    """A GPU lease's first steps, then a CPU's: ``devices`` keeps both, with the steps they began at."""
    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, where="lease", ctx=CancelAt(123))
    got = train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, where="desk", ctx=CancelAt(10**9))
    assert got.devices == [[0, "lease"], [100, "desk"]]
    assert train_model(fresh_model(task), task, CONFIG, seed=1).devices == [[0, "cpu"]]  # default: the device


def test_a_checkpoint_from_before_devices_were_recorded_still_resumes(tmp_path):
    """The in-flight states of the paper-steps study were written without ``devices``: they resume,
    and only the attempts from then on are recorded."""
    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, ctx=CancelAt(123))
    state = torch.load(ckpt, weights_only=True)
    del state["loop"]["devices"]
    torch.save(state, ckpt)
    got = train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, where="desk", ctx=CancelAt(10**9))
    assert (got.resumed_at, got.devices) == ([100], [[100, "desk"]])


def test_checkpoint_every_rounds_up_to_a_data_block(tmp_path):
    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):  # checkpoint_every 30 → every 50 (two blocks of 25)
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=30, ctx=CancelAt(74))
    got = train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, ctx=CancelAt(10**9))
    assert got.resumed_at == [50]


def test_another_runs_checkpoint_is_refused(tmp_path):
    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=25, ctx=CancelAt(30))
    with pytest.raises(CheckpointMismatch, match="another run") as got:
        train_model(fresh_model(task), task, CONFIG, seed=2, checkpoint=ckpt)
    assert str(ckpt) in str(got.value) and "delete the file, or train with force (`--force`)" in str(got.value)
    with pytest.raises(CheckpointMismatch):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_key="other-run-hash")
    assert ckpt.exists()  # refused, not overwritten


def test_no_checkpoint_no_file(tmp_path):
    task = get_task("parity")
    train_model(fresh_model(task), task, CONFIG, seed=1)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_train_job_resumes_from_the_store(tmp_path):
    """The worker keeps the state under ``<store>/training/<run hash>.pt``; the same job run again
    resumes there, records where, and stores the weights an unbroken job stores (lr 1e-4: the
    criterion is not reached before the kill)."""
    from worker.job_params import TrainParams
    from worker.pipeline import local_env, train, training_checkpoint

    params = TrainParams(
        family="gru", task="parity", seed=0, n_layers=2, d_model=16, train_length=12, batch_size=16,
        max_steps=150, eval_every=25, n_eval_sequences=64, warmup_steps=5, curriculum_start=None,
        early_stop_acc=1.0, lr=1e-4,
    )  # fmt: skip
    killed = local_env(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "a", device="cpu")
    with pytest.raises(JobCancelled):
        train(params, killed, ctx=CancelAt(130))
    assert training_checkpoint(params, killed).exists()
    run_id = train(params, killed)
    assert not training_checkpoint(params, killed).exists()

    unbroken = local_env(f"sqlite:///{tmp_path / 'b.db'}", tmp_path / "b", device="cpu")
    other_id = train(params, unbroken)
    assert_resumed_equals_unbroken(killed, run_id, unbroken, other_id, at=[100])


def test_a_failed_write_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    """Disk full while writing: the error reaches the caller, the previous checkpoint is intact
    and no temporary file is left."""
    from science import train_checkpoint

    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=25, ctx=CancelAt(30))
    before = ckpt.read_bytes()

    def full(obj, fh):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(train_checkpoint.torch, "save", full)
    with pytest.raises(OSError, match="No space left"):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=25)
    assert ckpt.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_an_unreadable_checkpoint_names_the_file_and_how_to_start_afresh(tmp_path, damage):
    """A checkpoint cut short (a kill -9 before the atomic write, a full disk, a half copy) is a
    CheckpointUnreadable (a ValueError: the CLI prints it in one line) naming the file and
    ``--force`` / deleting it, every time, not torch's zip error; the file is left as it is."""
    task = get_task("parity")
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt, checkpoint_every=25, ctx=CancelAt(30))
    data = ckpt.read_bytes()
    ckpt.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"not a checkpoint" * 10, "empty": b""}[damage])
    before = ckpt.read_bytes()
    for _ in range(2):
        with pytest.raises(CheckpointUnreadable) as got:
            train_model(fresh_model(task), task, CONFIG, seed=1, checkpoint=ckpt)
        msg = str(got.value)
        assert msg.startswith(f"training checkpoint {ckpt} cannot be read (") and "\n" not in msg
        assert msg.endswith("delete the file, or train with force (`--force`), to start the run afresh")
    assert isinstance(got.value, ValueError) and ckpt.read_bytes() == before


def test_the_documented_checkpoint_steps_hold(tmp_path):
    """docs/SCIENCE.md#resuming-training: 100 steps rounded up to whole data blocks, so the smoke
    preset's 6-step blocks (eval_every 6) checkpoint at 102, 204, …, not at 100, 200."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "SCIENCE.md").read_text()
    section = doc[doc.index('id="resuming-training"') :][:1500]
    assert "checkpoints at steps 102, 204, 306" in " ".join(section.split())
    task = get_task("parity")
    c = TrainConfig(train_length=8, batch_size=8, max_steps=150, eval_every=6, n_eval_sequences=16, warmup_steps=5)
    ckpt = tmp_path / "run.pt"
    with pytest.raises(JobCancelled):
        train_model(fresh_model(task), task, c, seed=1, checkpoint=ckpt, ctx=CancelAt(110))
    got = train_model(fresh_model(task), task, c, seed=1, checkpoint=ckpt, ctx=CancelAt(10**9))
    assert got.resumed_at == [102]
