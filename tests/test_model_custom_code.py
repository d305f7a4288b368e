"""A model folder whose config asks to run its own code (``auto_map``) is refused without running
it: transformers would ask "Do you wish to run the custom code? [y/N]" at a
terminal, so one keystroke ran a stranger's code. Every config and model is read with
``trust_remote_code=False``; the folder's Python file here writes a marker if it is ever imported."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from layerscope_core.model_sources import NO_CUSTOM_CODE, custom_code_problem
from models_store.any_model import PretrainedLoadError, pretrained_family, read_config
from models_store.pretrained import load_pretrained
from tests import test_file_task
from tests.cli_one_line import assert_one_line_error

cli_env = test_file_task.cli_env  # a temp home, DB, queue and model store; the hub offline


@pytest.fixture
def custom_code_folder(tmp_path):
    folder = tmp_path / "stranger-model"
    folder.mkdir()
    marker = tmp_path / "custom code ran"
    config = {
        "model_type": "gpt2",
        "n_layer": 1,
        "n_embd": 8,
        "n_head": 2,
        "vocab_size": 16,
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(
        b""
    )  # weights as a real model ships them: custom code is what is refused
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return folder, marker


def test_read_config_refuses_it_without_running_it(custom_code_folder) -> None:
    folder, marker = custom_code_folder
    with pytest.raises(PretrainedLoadError) as err:
        read_config(str(folder))
    assert "asks to run custom code (auto_map: AutoConfig, AutoModel)" in str(err.value)
    assert NO_CUSTOM_CODE in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="custom code"):
        pretrained_family(str(folder))
    assert not marker.exists()


def test_load_pretrained_refuses_it_without_running_it(custom_code_folder) -> None:
    folder, marker = custom_code_folder
    with pytest.raises(PretrainedLoadError, match="never runs a model's own code"):
        load_pretrained(str(folder), n_classes=2, task_vocab_size=4, local_files_only=True)
    with pytest.raises(PretrainedLoadError, match="never runs a model's own code"):
        load_pretrained(str(folder), n_classes=2, task_vocab_size=4, local_files_only=True, weights=False)
    assert not marker.exists()


def test_a_config_read_from_the_hub_with_auto_map_is_refused_too(tmp_path) -> None:
    hub_config = SimpleNamespace(auto_map={"AutoModel": "x.Y"})
    assert "auto_map: AutoModel" in custom_code_problem("org/name", hub_config)
    assert custom_code_problem("org/name", SimpleNamespace()) is None
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert custom_code_problem(str(tmp_path)) is None  # an ordinary folder passes


def test_the_cli_refuses_it_in_one_line(custom_code_folder, cli_env) -> None:
    folder, marker = custom_code_folder
    args = ["suite", "--preset", "smoke", "--pretrained", str(folder), "--task", "parity"]
    assert_one_line_error(args, "custom code")
    assert not marker.exists()
