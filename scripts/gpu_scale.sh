#!/usr/bin/env bash
# Lab-scale shapes on one lent GPU in one unattended command: seconds and peak GPU memory of each
# measurement part (probes, interventions, patching) of Pythia-160M and Pythia-410M shapes (GPT-NeoX
# from config, random weights) and a Mamba-130M shape, through benchmarks/bench_scale.py, into $OUT.
#
#   scripts/gpu_scale.sh [BUDGET_SECONDS]            # on the GPU machine (default 540: fits a 9-minute call)
#   scripts/gpu_scale.sh --dry-run [BUDGET_SECONDS]  # here, on CPU: toy shapes and sizes (intervention
#                                                    # layer 1 alone), the same steps and files; give it a
#                                                    # large budget (e.g. 3000) on a loaded machine
#
# Each part of each shape is its own bench_scale run under `timeout`, given its share of the budget
# (SHARES below, of what is left when it starts), so a slow part costs only its share. Out:
#   $OUT/scale.jsonl  one JSON line per finished part ("part", "seconds", "peak_gpu_gb", "rows", ...),
#                     progress lines (a part's "progress" fraction after "seconds": a part stopped by
#                     its limit says how far it got), the measurement's log lines ("log": a fit-size
#                     doubling, INLP's budget) and one {"part": ..., "timed_out": true} line per
#                     part its limit stopped; bench_scale's summary line ("part": "total") per run;
#   $OUT/scale.log    what every step printed;   $OUT/env.txt  torch / CUDA / GPU / kernels found.
# A part that fails on the GPU runs once more with its states in host memory
# (LAYERSCOPE_STATES_ON=cpu, science.captured.states_device), labelled "<shape>-states-on-cpu".
#
# On the GPU machine (no registry there): our package is installed with `pip install --no-deps`
# from this checkout, after the wheels under .whl/ (scripts/gpu_wheels.sh makes them here; carry
# .whl with the call). Environment: OUT (default ./gpu-out), PRECISION (bf16 | fp32, default bf16),
# SHAPES (default "pythia160m mamba130m pythia410m"), LAYERSCOPE_MEASURE_MEMORY_GB (default 16).
# Pythia-160M and Mamba-130M are measured in full (MeasureParams' defaults: 500 sequences at every
# eval length 40..120, every layer, every method, INLP uncapped, the 128-pair patching grid);
# Pythia-410M's interventions at 3 of its 24 layers (0, 12, 23: each layer is measured alike, so
# the full part is ~8× that), its probes and patching in full.
set -u
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
budget=${1:-540}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
jsonl=$OUT/scale.jsonl log=$OUT/scale.log
: >"$jsonl"
: >"$log"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
say() { echo "[$(elapsed)s] $*" | tee -a "$log"; }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false LAYERSCOPE_HOME=${LAYERSCOPE_HOME:-/tmp/layerscope}
export LAYERSCOPE_MEASURE_MEMORY_GB=${LAYERSCOPE_MEASURE_MEMORY_GB:-16}
mkdir -p "$LAYERSCOPE_HOME"

if [ "$dry" = 1 ]; then
  device=cpu precision=${PRECISION:-bf16}
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  device=cuda precision=${PRECISION:-bf16}
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      >>"$log" 2>&1 || { say "wheel install failed"; exit 1; }
    export PYTHONPATH=/tmp/site
  fi
  # our package, without its dependencies (the machine reaches no registry): --no-build-isolation
  # builds with the image's setuptools; if that fails, the checkout on PYTHONPATH serves the same code
  python3 -m pip install -q --no-deps --no-index --no-build-isolation --target /tmp/ours . >>"$log" 2>&1 \
    && export PYTHONPATH=/tmp/ours${PYTHONPATH:+:$PYTHONPATH} \
    || { say "pip install --no-deps of the package failed: running from the checkout"; export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}; }
fi
python3 - >"$OUT/env.txt" 2>&1 <<'EOF'
import importlib.util, os, platform, torch, transformers
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
print("mamba_ssm", importlib.util.find_spec("mamba_ssm") is not None, "causal_conv1d", importlib.util.find_spec("causal_conv1d") is not None)
print("cores", os.cpu_count())
EOF
rc=$?
cat "$OUT/env.txt" | tee -a "$log"
[ "$rc" = 0 ] || { say "environment check failed"; exit 1; }
if [ "$dry" = 0 ] && ! grep -q "^cuda True" "$OUT/env.txt"; then say "no CUDA device"; exit 1; fi

# shape → bench_scale's model arguments (dry run: the same families at toy sizes)
shape_args() {
  if [ "$dry" = 1 ]; then
    case $1 in
      pythia160m) echo "--family gpt_neox --layers 2 --d-model 32 --heads 4" ;;
      pythia410m) echo "--family gpt_neox --layers 3 --d-model 32 --heads 4" ;;
      mamba130m) echo "--family mamba --layers 2 --d-model 32" ;;
    esac
    return
  fi
  case $1 in
    pythia160m) echo "--family gpt_neox --layers 12 --d-model 768 --heads 12" ;;
    pythia410m) echo "--family gpt_neox --layers 24 --d-model 1024 --heads 16" ;;
    mamba130m) echo "--family mamba --layers 24 --d-model 768" ;;
  esac
}
# the measurement's size: in full on the GPU (MeasureParams' defaults), toy-sized in the dry run
if [ "$dry" = 1 ]; then
  sizes="--sequences 24 --lengths 12 --inlp-max-rounds 1 --patch-pairs 8 --patch-length 8"
else
  sizes="--sequences 500 --lengths 40,60,80,100,120 --inlp-max-rounds 0"
fi
layers_of() {  # the intervention layers of a shape (the dry run: one layer each)
  if [ "$dry" = 1 ]; then echo 1; elif [ "$1" = pythia410m ]; then echo "0,12,23"; else echo all; fi
}
# Each part's weight: its share of the time left when it starts is its weight over the weights of
# the parts not yet run (the last one gets the rest; a part that ends early hands its time on).
weight() { case $1 in interventions) echo 3 ;; *) echo 1 ;; esac; }
steps=()
for shape in ${SHAPES:-pythia160m mamba130m pythia410m}; do
  for part in probes interventions patching; do steps+=("$shape:$part"); done
done
n=${#steps[@]}
say "gpu_scale: ${n} parts, budget ${budget}s, device $device, precision $precision"
for i in "${!steps[@]}"; do
  shape=${steps[$i]%%:*} part=${steps[$i]#*:}
  left=$(( budget - $(elapsed) ))
  rest=0
  for later in "${steps[@]:$i}"; do rest=$(( rest + $(weight "${later#*:}") )); done
  share=$(( left * $(weight "$part") / rest ))
  if [ "$share" -lt 5 ]; then
    say "$shape $part: skipped, ${left}s left"
    echo "{\"label\": \"$shape\", \"part\": \"$part\", \"skipped\": true, \"left_s\": $left}" >>"$jsonl"
    continue
  fi
  say "$shape $part: up to ${share}s"
  # shellcheck disable=SC2046,SC2086
  timeout --signal=TERM --kill-after=10 "$share" python3 benchmarks/bench_scale.py $(shape_args "$shape") $sizes \
    --parts "$part" --interv-layers "$(layers_of "$shape")" --device "$device" --precision "$precision" \
    --label "$shape" --jsonl "$jsonl" --json >>"$log" 2>&1
  status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    say "$shape $part: stopped at its ${share}s limit"
    echo "{\"label\": \"$shape\", \"part\": \"$part\", \"timed_out\": true, \"limit_s\": $share}" >>"$jsonl"
  elif [ "$status" != 0 ]; then
    say "$shape $part: FAILED (exit $status; the end of $log says why)"
    echo "{\"label\": \"$shape\", \"part\": \"$part\", \"failed\": true, \"exit\": $status}" >>"$jsonl"
    left=$(( budget - $(elapsed) ))
    if [ "$device" = cuda ] && [ "$left" -gt 30 ]; then  # once more with the states in host memory
      say "$shape $part: again with LAYERSCOPE_STATES_ON=cpu, up to $(( left / 3 ))s"
      # shellcheck disable=SC2046,SC2086
      LAYERSCOPE_STATES_ON=cpu timeout --signal=TERM --kill-after=10 $(( left / 3 )) python3 benchmarks/bench_scale.py \
        $(shape_args "$shape") $sizes --parts "$part" --interv-layers "$(layers_of "$shape")" --device "$device" \
        --precision "$precision" --label "$shape-states-on-cpu" --jsonl "$jsonl" --json >>"$log" 2>&1 \
        || say "$shape $part on cpu states: exit $?"
    fi
  fi
done
say "gpu_scale done"
python3 - "$jsonl" <<'EOF' | tee -a "$log"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "progress" in r or "log" in r or r.get("part") == "total":
        continue
    what = "timed out" if r.get("timed_out") else "failed" if r.get("failed") else "skipped" if r.get("skipped") else f"{r['seconds']} s, peak GPU {r.get('peak_gpu_gb')} GiB, {r.get('rows')} rows"
    print(f"{r['label']:>11} {r['part']:<13} {what}")
EOF
