"""Your own labelled data: a 200-row JSONL of labelled tokens goes through
``layerscope task add`` and a suite (train → probes → interventions → patching); Parquet rows and
text with labelled character spans (aligned by a tokenizer's offsets) parse to the same kind of
task; bad files are refused with one message per bad row; the store is content-addressed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sqlalchemy import select

from science.tasks import get_task, task_names
from science.tasks.file_task import IGNORE, TaskFileError, parse_task_file
from science.tasks.task_store import TaskStore

L = 24


def parity_rows(n_pairs: int = 100, seed: int = 0) -> list[dict]:
    """Parity rows (label = XOR of the prefix; position 0 not probed), each with its twin whose
    first bit is flipped, so the file holds one-token corruption pairs."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_pairs):
        bits = rng.integers(0, 2, L)
        for b in (bits, np.concatenate([[1 - bits[0]], bits[1:]])):
            labels = np.cumsum(b) % 2
            rows.append({"tokens": b.tolist(), "labels": [None, *labels[1:].tolist()]})
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    from store.settings import get_settings

    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'queue.db'}")
    monkeypatch.setenv("LAYERSCOPE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_parse_ids_with_null_labels(tmp_path):
    f = parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows(10)))
    assert len(f.tokens) == 20 and f.vocab is None and f.class_names == ("0", "1")
    assert f.vocab_size == 3  # ids 0, 1 and PAD
    assert all(lab[0] == IGNORE for lab in f.labels)
    assert len(f.digest) == 64 and f.digest == parse_task_file(tmp_path / "p.jsonl").digest


def test_bad_rows_are_each_named(tmp_path):
    rows = parity_rows(10)
    rows[2] = {"tokens": [0, 1, 1], "labels": [0, 1]}
    rows[5] = {"tokens": [0, 1], "labels": [0, -3]}
    rows[7] = {"tokens": [0, "a"], "labels": [0, 1]}
    rows[9] = {"tokenz": [0], "labels": [0]}
    with pytest.raises(TaskFileError) as err:
        parse_task_file(write_jsonl(tmp_path / "bad.jsonl", rows))
    msg = str(err.value)
    assert err.value.errors == [
        "row 3: 3 tokens but 2 labels",
        "row 6: the label at position 1 (counting from 0) is -3; expected an integer >= 0, a string or null",
        "row 8: tokens must all be non-negative integer ids or all strings",
        "row 10: expected exactly the fields tokens and labels (unknown ['tokenz']; missing ['tokens'])",
    ]
    assert "4 problem(s)" in msg
    (tmp_path / "broken.jsonl").write_text('{"tokens": [1]}\nnot json\n')
    with pytest.raises(TaskFileError, match="line 2: not JSON"):
        parse_task_file(tmp_path / "broken.jsonl")
    with pytest.raises(TaskFileError, match="1 value"):
        parse_task_file(write_jsonl(tmp_path / "one.jsonl", [{"tokens": [1, 2], "labels": [0, 0]}] * 12))


def test_a_file_not_utf8_is_refused_and_a_bom_is_read_past(tmp_path):
    """Two Latin-1 tokens once became the same replacement character (one token, two labels)."""
    rows = [json.dumps({"tokens": ["\u00e9", "\u00e8", "a"], "labels": [0, 1, 0]}, ensure_ascii=False)] * 10
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes("\n".join(rows).encode("latin-1"))
    with pytest.raises(TaskFileError) as err:
        parse_task_file(latin)
    at = rows[0].encode("latin-1").index(b"\xe9")  # the first byte that is not UTF-8, counted from 0
    assert err.value.errors == [f"line 1: not valid UTF-8 (byte {at} counting from 0: invalid continuation byte)"]
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes("\n".join(rows).encode("utf-8-sig"))
    f = parse_task_file(bom)
    assert f.vocab == ("a", "\u00e8", "\u00e9") and f.tokens[0] == (2, 1, 0)


def test_a_token_id_past_the_vocabulary_limit_is_refused_at_its_row(tmp_path):
    """A huge id was accepted, then every model failed on a parameter count it could not meet."""
    from science.tasks.validation import MAX_VOCAB

    rows = parity_rows(10)
    rows[3] = {"tokens": [0, 10**12], "labels": [0, 1]}
    rows[4] = {"tokens": [0, MAX_VOCAB - 2], "labels": [0, 1]}  # the largest id allowed
    with pytest.raises(TaskFileError) as err:
        parse_task_file(write_jsonl(tmp_path / "huge.jsonl", rows))
    assert err.value.errors == [f"row 4: token id {10**12} is over the limit: ids run from 0 to {MAX_VOCAB - 2}"]
    del rows[3]
    assert parse_task_file(write_jsonl(tmp_path / "edge.jsonl", rows)).vocab_size == MAX_VOCAB


def test_string_tokens_and_labels_from_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = [["the", "cat", "sat"], ["a", "dog", "ran", "off"]] * 6
    tags = [["DET", "NOUN", "VERB"], ["DET", "NOUN", "VERB", None]] * 6
    pq.write_table(pa.table({"tokens": words, "labels": tags}), tmp_path / "pos.parquet")
    f = parse_task_file(tmp_path / "pos.parquet")
    assert f.vocab == ("a", "cat", "dog", "off", "ran", "sat", "the") and f.class_names == ("DET", "NOUN", "VERB")
    assert f.tokens[1] == (0, 2, 4, 3) and f.labels[1] == (0, 1, 2, IGNORE)


def test_text_spans_align_through_tokenizer_offsets(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[UNK]", "Alice", "met", "Bob", "in", "Paris", "."])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]")
    text = "Alice met Bob in Paris."
    rows = [{"text": text, "spans": [[0, 5, "PER"], [10, 13, "PER"], [17, 22, "LOC"]]}] * 10
    f = parse_task_file(write_jsonl(tmp_path / "ner.jsonl", rows), tokenizer=tok)
    assert f.vocab == (".", "Alice", "Bob", "Paris", "in", "met") and f.class_names == ("LOC", "PER")
    assert f.tokens[0] == (1, 5, 2, 4, 3, 0)
    assert f.labels[0] == (1, IGNORE, 1, IGNORE, 0, IGNORE)
    with pytest.raises(TaskFileError, match="row 1: a text row needs a tokenizer"):
        parse_task_file(tmp_path / "ner.jsonl")


def test_store_is_content_addressed_and_names_are_bound(tmp_path):
    store = TaskStore(tmp_path / "tasks")
    f = parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows(10)))
    digest = store.add(f, "mine")
    assert (tmp_path / "tasks" / f"{digest}.json").read_bytes() == f.canonical_bytes()
    assert store.add(f, "mine") == digest  # the same content again: a no-op
    other = parse_task_file(write_jsonl(tmp_path / "q.jsonl", parity_rows(10, seed=1)))
    with pytest.raises(ValueError, match="already bound to another file"):
        store.add(other, "mine")
    with pytest.raises(ValueError, match="built-in task"):
        store.add(other, "parity", builtin=("parity",))
    task = store.load("mine")
    assert task.params == {"sha256": digest} and task.lengths == [L]
    with pytest.raises(ValueError, match="the store holds"):
        store.load("mine", sha256="0" * 64)


def test_generate_splits_crops_pads_and_pairs(tmp_path):
    store = TaskStore(tmp_path / "tasks")
    store.add(parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows())), "par")
    task = store.load("par")
    test = task.generate(L, 500, seed=0, split="test")
    assert test.n == 40  # a fifth of 200, never more
    train = task.generate(L, 64, seed=0, split="train")
    assert train.n == 64 and torch.equal(train.tokens, task.generate(L, 64, seed=0, split="train").tokens)
    test_rows = {tuple(r) for r in test.tokens.tolist()}
    assert not test_rows & {tuple(r) for r in task.generate(L, 2000, seed=1, split="train").tokens.tolist()}
    short = task.generate(8, 4, seed=0, split="test")
    assert torch.equal(short.tokens, test.tokens[:4, :8]) or short.tokens.shape == (4, 8)
    long = task.generate(L + 4, 4, seed=0, split="test")
    assert (long.tokens[:, L:] == task.pad_id).all() and (long.labels[:, L:] == IGNORE).all()
    clean, corr, pos = task.corruption_pairs(L, 16, seed=0)
    assert (pos == 0).all() and clean.n == 16
    assert ((clean.tokens != corr.tokens).sum(dim=1) == 1).all()
    assert (clean.labels[:, -1] != corr.labels[:, -1]).all()


def test_task_add_then_a_suite_measures_every_layer(cli_env, capsys, tmp_path):
    from backend.cli import main
    from store.models import InterventionResult, PatchingResult, ProbeResult, Run
    from store.session import make_engine, make_sessionmaker

    path = write_jsonl(tmp_path / "parity200.jsonl", parity_rows())
    assert main(["task", "add", str(path), "--name", "my_parity"]) == 0
    out = capsys.readouterr().out
    assert "task my_parity: 200 rows, lengths 24..24, 2 token ids (and the padding token)" in out and "sha256" in out
    assert "my_parity" in task_names()
    assert main(["task", "list"]) == 0 and "my_parity\t200 rows" in capsys.readouterr().out
    # a bad file: one line per bad row, exit 1, nothing stored
    rows = parity_rows(10)
    rows[3]["labels"] = rows[3]["labels"][:-1]
    assert main(["task", "add", str(write_jsonl(tmp_path / "bad.jsonl", rows)), "--name", "bad"]) == 1
    err = capsys.readouterr().err
    assert "row 4: 24 tokens but 23 labels" in err and "Traceback" not in err
    assert "bad" not in task_names()
    assert main(["task", "add", str(tmp_path), "--name", "folder"]) == 1
    assert "a folder, not a file" in capsys.readouterr().err

    rc = main(["suite", "--preset", "smoke", "--task", "my_parity", "--family", "gru", "--device", "cpu"])
    assert rc == 0, capsys.readouterr()
    s = make_sessionmaker(make_engine(f"sqlite:///{cli_env / 'cli.db'}"))()
    run = s.scalars(select(Run)).one()
    assert run.task == "my_parity" and run.status == "complete"
    assert run.task_params == {"sha256": get_task("my_parity").params["sha256"]}
    assert run.train_config["train_length"] == L and set(run.behaviour) == {str(L)}  # the file's sequences
    probes = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run.id)).all()
    assert {(p.layer, p.eval_length) for p in probes} == {(ly, L) for ly in range(-1, run.n_layers)}
    assert all(p.n_train + p.n_test <= 40 for p in probes)  # the held-out fifth of the file, no repeats
    assert s.scalars(select(InterventionResult).where(InterventionResult.run_id == run.id)).first() is not None
    sites = {p.site for p in s.scalars(select(PatchingResult).where(PatchingResult.run_id == run.id))}
    assert {"resid_pre", "resid_post", "state"} <= sites
    s.close()


def test_upload_on_the_api_then_a_job_names_it(api, tmp_path):
    """POST /api/tasks (the /jobs page's upload): validated per row, stored in the API's model store,
    listed by GET /api/tasks and /api/meta, and accepted by a train job's params."""
    import base64

    good = write_jsonl(tmp_path / "p.jsonl", parity_rows(10)).read_bytes()
    c = api.client
    r = c.post(
        "/api/tasks",
        json={"name": "uploaded", "filename": "p.jsonl", "content_base64": base64.b64encode(good).decode()},
    )
    assert r.status_code == 201, r.text
    assert r.json()["n_rows"] == 20 and r.json()["lengths"] == [L]
    assert (api.settings.resolved_store_dir / "tasks" / f"{r.json()['sha256']}.json").is_file()
    assert [t["name"] for t in c.get("/api/tasks").json()] == ["uploaded"]
    assert "uploaded" in c.get("/api/meta").json()["tasks"]
    rows = parity_rows(10)
    rows[1]["labels"] = rows[1]["labels"][:3]
    bad = write_jsonl(tmp_path / "bad.jsonl", rows).read_bytes()
    r = c.post(
        "/api/tasks", json={"name": "bad", "filename": "bad.jsonl", "content_base64": base64.b64encode(bad).decode()}
    )
    assert r.status_code == 422 and "row 2: 24 tokens but 3 labels" in r.text
    r = c.post(
        "/api/tasks",
        json={
            "name": "uploaded",
            "filename": "q.jsonl",
            "content_base64": base64.b64encode(
                write_jsonl(tmp_path / "q.jsonl", parity_rows(10, seed=3)).read_bytes()
            ).decode(),
        },
    )
    assert r.status_code == 422 and "already bound" in r.text
    job = c.post("/api/jobs", json={"kind": "train", "params": {"family": "gru", "task": "uploaded", "max_steps": 2}})
    assert job.status_code in (201, 202), job.text
    assert job.json()["params"]["train_length"] == L  # the file's sequences


def test_follow_up_patch_job_uses_the_files_length(tmp_path):
    from sqlalchemy import func

    from store.models import PatchingResult
    from worker.job_params import PatchParams, TrainParams
    from worker.pipeline import local_env, patch, train

    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    TaskStore(tmp_path / "store" / "tasks").add(
        parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows())), "par"
    )
    run_id = train(
        TrainParams(
            family="gru",
            task="par",
            n_layers=1,
            d_model=8,
            max_steps=2,
            batch_size=8,
            eval_every=2,
            n_eval_sequences=16,
            measure=None,
        ),
        env,
    )
    job = PatchParams(run_id=run_id, n_pairs=4, sites=["resid_post"])
    assert patch(job, env) == run_id
    with env.session_factory() as s:
        lengths = s.scalars(select(PatchingResult.eval_length).where(PatchingResult.run_id == run_id)).all()
        assert set(lengths) == {L} and s.scalar(select(func.count()).select_from(PatchingResult)) == 2 * L


def test_a_probe_past_the_files_longest_row_is_refused_before_measuring(tmp_path):
    """Rows end at the file's longest: a probe at a longer eval length would measure padding and
    store numbers that look real (a new user's probe at 40 on a file of 20-token rows)."""
    from store.models import ProbeResult
    from worker.job_params import PatchParams, ProbeParams, TrainParams
    from worker.pipeline import local_env, patch, probe, train

    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    TaskStore(tmp_path / "store" / "tasks").add(
        parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows())), "par"
    )
    params = dict(n_layers=1, d_model=8, max_steps=2, batch_size=8, eval_every=2, n_eval_sequences=16, measure=None)
    run_id = train(TrainParams(family="gru", task="par", **params), env)
    with pytest.raises(
        ValueError, match=rf"eval length {L + 20}: task 'par' is a file task whose rows have {L} tokens"
    ):
        probe(ProbeParams(run_id=run_id, eval_lengths=[L, L + 20]), env)
    with pytest.raises(ValueError, match="its eval lengths are at most"):
        patch(PatchParams(run_id=run_id, eval_length=L + 1, n_pairs=4, sites=["resid_post"]), env)
    with env.session_factory() as s:
        assert not s.scalars(select(ProbeResult.id).where(ProbeResult.run_id == run_id)).all()  # nothing stored
    assert probe(ProbeParams(run_id=run_id, eval_lengths=[L]), env) == run_id  # the file's own length: measured


def test_a_file_without_one_token_pairs_is_measured_without_patching(tmp_path):
    from store.models import PatchingResult, ProbeResult, Run
    from worker.job_params import MeasureParams, TrainParams
    from worker.pipeline import local_env, train

    rng = np.random.default_rng(1)
    rows = [{"tokens": (b := rng.integers(0, 2, L)).tolist(), "labels": (np.cumsum(b) % 2).tolist()} for _ in range(60)]
    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    task_file = parse_task_file(write_jsonl(tmp_path / "lone.jsonl", rows))
    TaskStore(tmp_path / "store" / "tasks").add(task_file, "lone")
    with pytest.raises(ValueError, match="cannot be patched"):
        get_task("lone").corruption_pairs(L, 4, seed=0)
    run_id = train(
        TrainParams(
            family="gru",
            task="lone",
            n_layers=1,
            d_model=8,
            max_steps=2,
            batch_size=8,
            eval_every=2,
            n_eval_sequences=16,
            measure=MeasureParams(n_probe_sequences=24, n_permutations=100, n_patch_pairs=4, methods=["mean"]),
        ),
        env,
    )
    with env.session_factory() as s:
        assert s.get(Run, run_id).status == "complete"
        assert s.scalars(select(ProbeResult).where(ProbeResult.run_id == run_id)).first() is not None
        assert s.scalars(select(PatchingResult).where(PatchingResult.run_id == run_id)).first() is None


def test_the_multipart_upload_takes_the_file_streamed_and_says_why_it_refuses(api, tmp_path):
    """POST /api/tasks/upload (the jobs page's upload, sent by the browser): a multipart file past
    the API's JSON body limit is taken; a bad row is named at ``file``; a Content-Length over the
    file limit is a 413 naming it, before the body is read."""
    from science.tasks.file_task import MAX_FILE_BYTES
    from store.settings import Settings

    rows = parity_rows(10) * 600  # ~1.5 MB: past the 1 MB body limit the JSON route lives under
    data = write_jsonl(tmp_path / "p.jsonl", rows).read_bytes()
    assert len(data) > Settings.model_fields["max_body_bytes"].default
    r = api.client.post("/api/tasks/upload", data={"name": "from_page"}, files={"file": ("p.jsonl", data)})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "from_page" and r.json()["n_rows"] == len(rows)
    bad_rows = parity_rows(10)
    bad_rows[0]["labels"] = [5.5] * L
    bad = write_jsonl(tmp_path / "b.jsonl", bad_rows).read_bytes()
    r = api.client.post("/api/tasks/upload", data={"name": "bad_one"}, files={"file": ("b.jsonl", bad)})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "file"]
    assert "row 1: the label at position 0 (counting from 0) is 5.5" in r.json()["detail"][0]["msg"]
    too_big = api.client.post(
        "/api/tasks/upload",
        content=b"x",
        headers={"content-type": "multipart/form-data; boundary=b", "content-length": str(MAX_FILE_BYTES + 2**17)},
    )
    assert too_big.status_code == 413 and "a task file may be up to 64 MiB" in too_big.json()["detail"]
    assert [t["name"] for t in api.client.get("/api/tasks").json()] == ["from_page"]


def test_the_pages_upload_limit_is_the_clis():
    from dashboard.task_upload import MAX_FILE_BYTES as PAGE
    from science.tasks.file_task import MAX_FILE_BYTES

    assert PAGE == MAX_FILE_BYTES


def test_an_api_job_past_the_files_longest_row_is_422_at_the_field(api, tmp_path):
    """The worker's refusal above, said at submit: a 422 at ``eval_lengths`` / ``eval_length``
    naming the file's lengths, and nothing queued; the file's own length is accepted."""
    import base64

    from sqlalchemy import update

    from store.models import Run
    from tests.conftest import seed_runs

    content = base64.b64encode(write_jsonl(tmp_path / "p.jsonl", parity_rows(10)).read_bytes()).decode()
    r = api.client.post("/api/tasks", json={"name": "mine", "filename": "p.jsonl", "content_base64": content})
    assert r.status_code == 201, r.text
    run_id = seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), n_layers=2)[0]
    with api.factory() as s:
        s.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(task="mine", task_params={"sha256": r.json()["sha256"]}, checkpoint_id="c" * 64)
        )
        s.commit()
    total = api.client.get("/api/jobs").json()["total"]
    for kind, params, field in (
        ("probe", {"eval_lengths": [L, L + 20]}, "eval_lengths"),
        ("patch", {"eval_length": L + 1}, "eval_length"),
    ):
        r = api.client.post("/api/jobs", json={"kind": kind, "params": {"run_id": run_id, **params}})
        assert r.status_code == 422, (kind, r.text)
        err = r.json()["detail"][0]
        assert err["loc"] == ["body", "params", field] and f"rows have {L} tokens" in err["msg"], err
    assert api.client.get("/api/jobs").json()["total"] == total  # nothing queued
    ok = api.client.post("/api/jobs", json={"kind": "probe", "params": {"run_id": run_id, "eval_lengths": [L]}})
    assert ok.status_code == 201, ok.text


def test_a_probe_asking_for_more_sequences_than_the_file_holds_says_how_many_it_measured(tmp_path):
    """A file task's held-out rows are all there are: the log says the probe measured on them, not
    on the number asked for, and the stored rows count them (the probe's own train and test split)."""
    from science.context import SilentContext
    from store.models import ProbeResult
    from worker.job_params import ProbeParams, TrainParams
    from worker.pipeline import local_env, probe, train

    class Logged(SilentContext):
        lines: list[str] = []

        def log(self, line: str) -> None:
            self.lines.append(line)

    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    TaskStore(tmp_path / "store" / "tasks").add(
        parse_task_file(write_jsonl(tmp_path / "p.jsonl", parity_rows())), "par"
    )
    params = dict(n_layers=1, d_model=8, max_steps=2, batch_size=8, eval_every=2, n_eval_sequences=16, measure=None)
    run_id = train(TrainParams(family="gru", task="par", **params), env)
    ctx = Logged()
    probe(ProbeParams(run_id=run_id, eval_lengths=[L], n_probe_sequences=1000), env, ctx)
    held_out = len(parse_task_file(tmp_path / "p.jsonl").tokens) // 5  # every fifth row is held out
    assert [x for x in ctx.lines if "held-out sequences" in x] == [
        f"probes at L={L}: task 'par' has {held_out} held-out sequences; measured on {held_out}, not 1000"
    ]
    with env.session_factory() as s:
        rows = s.execute(select(ProbeResult.n_train, ProbeResult.n_test).where(ProbeResult.run_id == run_id)).all()
    assert rows and {a + b for a, b in rows} == {held_out}


def test_task_add_refuses_a_name_a_plugin_task_has(cli_env, capsys, tmp_path):
    # a file task named like a plugin's task would never be read: a run naming it gets the plugin's
    from backend.cli import main
    from layerscope_core.registry import register_task, unregister_task
    from tests import toy_task

    path = write_jsonl(tmp_path / "p.jsonl", parity_rows(10))
    register_task(toy_task.MAJORITY)
    try:
        assert main(["task", "add", str(path), "--name", toy_task.NAME]) == 1
        err = capsys.readouterr().err
        assert f"task name {toy_task.NAME!r} is a plugin's task here" in err and "Traceback" not in err
        main(["task", "list"])
        assert f"{toy_task.NAME}\t" not in capsys.readouterr().out  # nothing stored
    finally:
        unregister_task(toy_task.NAME)
    assert main(["task", "add", str(path), "--name", toy_task.NAME]) == 0  # once no code task holds it
