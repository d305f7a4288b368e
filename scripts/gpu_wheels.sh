#!/usr/bin/env bash
# Download, on a machine with pip and the internet, the wheels that scripts/gpu_scale.sh needs on a
# lent GPU machine and its image lacks (that machine reaches no registry), into .whl/ (git-ignored).
#
#   scripts/gpu_wheels.sh            # then: carry .whl to the GPU machine beside the checkout
#
# The image holds torch, numpy, scipy, scikit-learn, safetensors, tokenizers, huggingface-hub,
# typer, pyyaml and tqdm (/work/.library/device/KINDS.md-style package list); it lacks pydantic and
# its settings package, concept-erasure (LEACE), and transformers within our pin (it has 5.17;
# models_store's Mamba mixers reproduce 5.20-5.24). Versions: the ones this checkout's environment
# runs (pip show), so the GPU runs what the CPU tests ran. CPython 3.12, x86-64 manylinux wheels;
# about 15 MB together.
set -eu
dest=${1:-.whl}
mkdir -p "$dest"
version() { python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
names="transformers pydantic pydantic-core pydantic-settings python-dotenv annotated-types typing-inspection concept-erasure"
specs=""
for n in $names; do specs="$specs $n==$(version "$n")"; done
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest" $specs
ls -la "$dest"
