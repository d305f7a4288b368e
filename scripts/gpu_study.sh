#!/usr/bin/env bash
# Run a study on one GPU machine in one unattended command, leaving what it made under $OUT.
#
#   scripts/gpu_study.sh check           # CUDA smoke suite (every family, every measurement) + steps-to-criterion "before"
#   scripts/gpu_study.sh study [SECONDS] # the `paper` preset on every job slot, stopped and exported by the deadline
#
# Needs: python3 with torch (CUDA) and this repo's dependencies (missing wheels under .whl/ are
# installed into /tmp/site first). Environment: OUT (output folder, default ./gpu-out),
# SLOTS (worker slots on the GPU, default: CPU cores - 1), SUITE_NAME (default paper), PRESET
# (default paper), DEVICE (default cuda), SUITE_ARGS (more `layerscope suite` options, e.g.
# "--max-seconds 90" to bound each run's training on a short lease; several selections separated by ';'
# are submitted one after the other, e.g. "--task code_depth; --task s3 --family lstm"), RESUME_BUNDLE (a results
# bundle imported first, e.g. examples/paper.layerscope.zip with SUITE_ARGS="--max-seconds 75":
# only its missing runs are trained; a suite is resumed with the overrides it was made with,
# other settings go under another SUITE_NAME), EXPORT_ARGS (more `layerscope export` options, e.g.
# "--in-flight" to bring back the training state of runs the deadline stopped, so that a CPU resumes
# them), PARTIAL_EVERY (seconds between safety exports, default 120), WORKER_ARGS (more `layerscope
# worker` options). A bundle larger than PART_KB (default 15360, 15 MiB) is split into NAME.bundle.part-aa, -ab, …
# (a lease returns files of at most 16 MiB): `cat NAME.bundle.part-* > NAME.bundle` joins them.
set -u
phase=${1:-study}
budget=${2:-480}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
log() { echo "[$(elapsed)s] $*"; }

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 LAYERSCOPE_HOME=${LAYERSCOPE_HOME:-/tmp/layerscope} TOKENIZERS_PARALLELISM=false
mkdir -p "$LAYERSCOPE_HOME"
cli() { python3 -m backend.cli "$@"; }
python3 -c "import torch, transformers, platform; print('torch', torch.__version__, 'transformers', transformers.__version__,
'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', 'cores', __import__('os').cpu_count())" \
  || exit 1
cores=$(nproc)
slots=${SLOTS:-$(( cores > 2 ? cores - 1 : 1 ))}

if [ "$phase" = check ]; then
  log "CUDA smoke suite: every family on parity, every measurement"
  cli suite --preset smoke --task parity --device cuda --name cuda-smoke 2>&1 | tail -20 | tee "$OUT/smoke.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { log "smoke suite FAILED"; exit 1; }
  cli export --suite cuda-smoke -o "$OUT/cuda-smoke.bundle" || log "export FAILED"
  log "steps to criterion, today's recipe (one seed, 3,000-step cap)"
  python3 benchmarks/bench_steps_to_criterion.py --recipe today --device cuda --jobs "$slots" --max-seconds 150 \
    --max-steps 3000 --seeds 0 --out "$OUT/steps_before" 2>&1 | tail -40
  log "check done"
  exit 0
fi

# ---- study: workers on every slot, the suite submitted, snapshots exported until the deadline
name=${SUITE_NAME:-paper}
device=${DEVICE:-cuda}
log "study: $slots slots, deadline ${budget}s"
# python3 itself, not the `cli` function: a function in the background is a subshell, and a
# SIGTERM to it would leave the worker running on, its job neither handed back nor saved
# shellcheck disable=SC2086
python3 -m backend.cli worker --device "$device" --concurrency "$slots" ${WORKER_ARGS:-} >"$OUT/worker.log" 2>&1 &
wpid=$!
if [ -n "${RESUME_BUNDLE:-}" ]; then
  cli import "$RESUME_BUNDLE" || { log "import of $RESUME_BUNDLE FAILED"; exit 1; }
fi
# SUITE_ARGS may hold several selections separated by ';', submitted in that order (the queue's order):
# e.g. "--task code_depth; --task s3 --family lstm" selects those cells and no cross product of them
IFS=';' read -ra selections <<< "${SUITE_ARGS:-}"
[ "${#selections[@]}" -gt 0 ] || selections=("")
for selection in "${selections[@]}"; do
  # shellcheck disable=SC2086
  cli suite --preset "${PRESET:-paper}" --name "$name" --submit $selection 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { log "suite not submitted: $selection"; kill -TERM "$wpid"; exit 1; }
done
progress() {
  python3 - "$LAYERSCOPE_HOME/layerscope.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=30)
jobs = dict(c.execute("select state, count(*) from jobs where kind='train' group by state").fetchall())
runs = dict(c.execute("select status, count(*) from runs group by status").fetchall())
print("train jobs", jobs, "| runs", runs, flush=True)
EOF
}
# A lease returns files of at most 16 MiB: split a larger bundle into parts (old parts removed first).
split_large() {
  rm -f "$1".part-*
  if [ -f "$1" ] && [ "$(stat -c %s "$1")" -gt $(( ${PART_KB:-15360} * 1024 )) ]; then
    split -b "${PART_KB:-15360}k" "$1" "$1.part-" && rm -f "$1" && log "split $(basename "$1") into $(ls "$1".part-* | wc -l) parts"
  fi
}
last_export=0
while kill -0 "$wpid" 2>/dev/null && [ "$(elapsed)" -lt "$budget" ]; do
  sleep 15
  progress
  done_jobs=$(python3 -c "import sqlite3;c=sqlite3.connect('$LAYERSCOPE_HOME/layerscope.db',timeout=30);print(c.execute(\"select count(*) from jobs where state in ('queued','running')\").fetchone()[0])")
  [ "$done_jobs" = 0 ] && { log "every job finished"; break; }
  if [ $(( $(elapsed) - last_export )) -ge "${PARTIAL_EVERY:-120}" ]; then
    # shellcheck disable=SC2086
    cli export --suite "$name" -o "$OUT/$name.bundle.partial" ${EXPORT_ARGS:-} >/dev/null 2>&1 && last_export=$(elapsed) \
      && split_large "$OUT/$name.bundle.partial"
  fi
done
log "stopping workers"
kill -TERM "$wpid" 2>/dev/null
for _ in $(seq 1 20); do kill -0 "$wpid" 2>/dev/null || break; sleep 1; done
kill -KILL "$wpid" 2>/dev/null
progress
# shellcheck disable=SC2086
cli export --suite "$name" -o "$OUT/$name.bundle" ${EXPORT_ARGS:-} && rm -f "$OUT/$name.bundle.partial"* \
  && split_large "$OUT/$name.bundle"
tail -c 200000 "$OUT/worker.log" > "$OUT/worker.tail.log"; rm -f "$OUT/worker.log"
log "study done"
