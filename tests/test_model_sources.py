"""A path-like model source with no folder there (``--pretrained ./missing``) is "no such local
folder" at once, in the CLI as in the API — not looked up on the hub as a model id, which failed
after ~10 s in the hub client's words ("Repo id must use alphanumeric chars ...")."""

from __future__ import annotations

import pytest

from tests.cli_one_line import assert_one_line_error

PATHS = ["./missing", "../missing", "/no/such/layerscope-model", "~/no-such-layerscope-model", "runs/a/b"]


@pytest.mark.parametrize("source", PATHS)
@pytest.mark.parametrize("option", ["--pretrained", "--from-config"])
@pytest.mark.usefixtures("cli_home", "hub_offline")
def test_the_cli_refuses_a_missing_folder_before_any_lookup(monkeypatch, option, source) -> None:
    import models_store.any_model as any_model

    def looked_up(*args, **kwargs):
        raise AssertionError(f"{source!r} was looked up as a model")

    monkeypatch.setattr(any_model, "read_config", looked_up)
    monkeypatch.setattr(any_model, "pretrained_family", looked_up)
    line = assert_one_line_error(["suite", "--preset", "smoke", option, source], "no such local folder", rc=2)
    assert f"'{option}'" in line and repr(source) in line, line


@pytest.mark.parametrize("source", PATHS)
def test_the_model_readers_say_the_same(source) -> None:
    """What a worker reads (``read_config``, for suites expanded there) words it as the API does."""
    from models_store.any_model import PretrainedLoadError, read_config

    with pytest.raises(PretrainedLoadError, match=f"from_config '{source}': no such local folder"):
        read_config(source, "from_config", local_files_only=True)


def test_the_rule(tmp_path, monkeypatch) -> None:
    from layerscope_core.model_sources import NO_SUCH_FOLDER, missing_folder_problem, names_a_path

    for hub_name in ("gpt2", "EleutherAI/pythia-70m", "state-spaces/mamba-130m-hf"):
        assert not names_a_path(hub_name) and missing_folder_problem(hub_name) is None
    for path in PATHS:
        assert names_a_path(path) and missing_folder_problem(path) == NO_SUCH_FOLDER
    (tmp_path / "model").mkdir()
    monkeypatch.chdir(tmp_path)
    for here in ("./model", str(tmp_path / "model"), "./model/"):
        assert missing_folder_problem(here) is None  # a folder here: read from it
    (tmp_path / "file").write_text("not a folder")
    assert missing_folder_problem("./file") == NO_SUCH_FOLDER


def test_a_bare_name_that_is_no_folder_here_says_why_the_hub_is_tried_and_names_close_folders(tmp_path, monkeypatch):
    """A mistyped local folder (``tiny-gpt2`` for ``./tiny_gpt2``) is a valid hub name: the hub is
    tried, and may retry for ~30 s offline. The CLI says so first, naming the folder meant."""
    import layerscope_core.model_sources as model_sources
    import models_store.any_model as any_model
    from layerscope_core.model_sources import hub_lookup_notice
    from tests.cli_one_line import run_cli

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(model_sources, "hub_unreachable", lambda: None)  # a machine whose hub resolves
    (tmp_path / "tiny_gpt2").mkdir()
    notice = hub_lookup_notice("tiny-gpt2", tmp_path)
    assert notice is not None and "is not a folder here (a folder here is named './tiny_gpt2')" in notice
    assert "HF_HUB_OFFLINE=1" in notice and "hub" in hub_lookup_notice("gpt2", tmp_path)  # no close folder: no hint
    assert "folder here is named" not in hub_lookup_notice("gpt2", tmp_path)
    assert hub_lookup_notice(str(tmp_path / "tiny_gpt2")) is None  # a folder: no lookup
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_lookup_notice("tiny-gpt2", tmp_path) is None  # the hub off: it fails at once anyway
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def hub_fails(*args, **kwargs):  # the hub's answer, without the network
        raise any_model.PretrainedLoadError("pretrained model 'tiny-gpt2' not found on the hub")

    monkeypatch.setattr(any_model, "read_config", hub_fails)
    monkeypatch.setattr(any_model, "pretrained_family", hub_fails)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path / "home"))
    rc, _, err = run_cli(["suite", "--preset", "smoke", "--task", "parity", "--pretrained", "tiny-gpt2"])
    assert rc != 0 and "Traceback" not in err, err
    said = err.splitlines()
    assert said[0].startswith("layerscope: 'tiny-gpt2' is not a folder here (a folder here is named './tiny_gpt2')"), (
        err
    )


@pytest.fixture
def fresh_lookups(monkeypatch):
    import layerscope_core.model_sources as model_sources

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(model_sources, "_hub_lookups", {})
    return model_sources


def test_a_hub_that_does_not_resolve_is_said_at_once_and_kept(fresh_lookups, monkeypatch) -> None:
    """Offline, the hub client retried a failed name lookup five times over ~30 s, printing each
    retry; the lookup is made once here (kept a minute) and a hub name is then read from the cache."""
    import socket

    asked: list[str] = []

    def no_name_server(host, *args, **kwargs):
        asked.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_name_server)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org/mirror")
    why = fresh_lookups.hub_unreachable()
    assert why == "hub.example.org does not resolve from here (Name or service not known)"
    assert fresh_lookups.hub_reads_offline() and fresh_lookups.hub_unreachable() == why
    assert asked == ["hub.example.org"]  # kept: one lookup
    assert fresh_lookups.hub_lookup_notice("gpt2") is None  # no "looking it up on the hub" wait to announce


def test_a_hub_that_resolves_or_a_slow_name_server_leaves_the_hub_client_to_try(fresh_lookups, monkeypatch) -> None:
    import socket
    import time

    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [("addr",)])
    assert fresh_lookups.hub_unreachable() is None and not fresh_lookups.hub_reads_offline()
    monkeypatch.setattr(fresh_lookups, "_hub_lookups", {})
    monkeypatch.setattr(fresh_lookups, "HUB_LOOKUP_SECONDS", 0.05)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: time.sleep(0.5))
    assert fresh_lookups.hub_unreachable() is None  # no answer in time: not called unreachable


def test_an_uncached_hub_name_fails_at_once_when_the_hub_does_not_resolve(fresh_lookups, monkeypatch) -> None:
    import transformers

    import models_store.any_model as any_model
    from models_store.pretrained import PretrainedLoadError, load_pretrained

    monkeypatch.setattr(fresh_lookups, "hub_unreachable", lambda: "huggingface.co does not resolve from here (x)")
    seen: list[bool] = []

    def from_pretrained(name, **kwargs):
        seen.append(kwargs["local_files_only"])
        raise OSError("not in the cached files")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", from_pretrained)
    with pytest.raises(PretrainedLoadError, match=r"not in the local cache \(the hub: huggingface.co does not resolve"):
        load_pretrained("org/model", 2, 8, weights=False)
    with pytest.raises(any_model.PretrainedLoadError, match="could not read the config"):
        any_model.read_config("org/model")
    assert seen == [True, True]  # read from the cache only: no hub retries
