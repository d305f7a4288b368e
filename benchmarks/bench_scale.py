"""A lab-scale model measured with the product's own code, against its FLOP floor in the same run.

    LAYERSCOPE_MEASURE_MEMORY_GB=0.75 python benchmarks/bench_scale.py --layers 24 --d-model 1024 \\
        --heads 16 --sequences 600 --lengths 40 --parts probes,interventions --interv-layers 22 --json

Builds a GPT-NeoX (or ``--family mamba``) model of the given shape with random weights: its
transformers config is written to a temporary folder and loaded through the product's from-config
path (``models_store.pretrained.load_pretrained(weights=False)``, what ``--from-config`` runs; no
hub). Then ``science.measure.measure_probes``, ``measure_interventions`` and
``science.patching.patching_grid`` run on it with the measurement defaults
(``worker.job_params.MeasureParams``) on the ``--task`` (dyck), under the memory bound
``LAYERSCOPE_MEASURE_MEMORY_GB`` (``store.settings.Settings.measure_memory_gb``).

How ``flops`` is counted (a floor: the work the measurement cannot avoid, matmuls only, and for
the solver's evaluations the bytes they read):

- a forward pass costs, per token, 2 × the weights of every ``nn.Linear`` in the blocks it runs
  (attention projections and MLP; Mamba's in/x/dt/out projections), + 4 · T · D per GPT-NeoX
  block for the attention scores and their weighted sum over T positions (T = the length + the
  START token), + 2 · D · C for the head;
- every probe fit the part makes (probes and their control twins, refits, every INLP round):
  each of the solver's function evaluations (``benchmarks/floors.py``'s ``counting_fits``, as the
  solver benchmarks count them) is 2 products ``[N, D] × [D, C]`` (4 · N · D · C) that read the
  float32 rows twice (2 · N · D · 4 bytes), and its floor is the larger of the two at the rates
  measured in the run (``max(FLOPs / peak_flops, bytes / peak_read_gbps)``, as
  ``benchmarks/floors.py`` counts it: at lab width the rows do not stay in cache and an
  evaluation is a read of them); standardising the rows (``2 · N · D²`` once per row set) and
  INLP's per-round updates are not counted, so the solver part of the floor is a lower bound;
- probes: one forward pass over every eval set (every layer's states), and the fits;
- interventions: one forward over the fit set and one over each eval set; each edited forward
  (every method, every random draw, stored ``random_draws``) from the edited layer on (the
  blocks after it and the head); the fits; the permutation tests (no matmul) are not counted;
- patching: per (site, position) pair cell the corrupted forward from the patched layer on.

``peak_flops``: the best of 5 matmuls ``[4096, D] × [D, 4·D]`` (float32 — by torch's BLAS and by
oneDNN, the better of the two —, or bfloat16 with ``--precision bf16``) timed in the same process on the same device, before the parts and again
after them (the better of the two), so machine load affects both sides; ``peak_read_gbps``: the
best of 5 sums over a 256 MiB float32 tensor there (out of cache), timed the same way;
``floor_seconds`` = the forward passes' FLOPs / ``peak_flops`` + the evaluations' floors
(``fit_floor_seconds``, at ``peak_flops_fp32``: the solvers run in float32 at every precision, so
at ``--precision bf16`` a float32 rate is timed beside the bfloat16 one); ``ratio = seconds / floor_seconds``. ``--json`` prints one object; without
it, one line per number. Memory figures (``peak_rss_gb``: the process's peak resident set,
``ru_maxrss``; ``peak_gpu_gb``) are in GiB (2^30 bytes), as ``LAYERSCOPE_MEASURE_MEMORY_GB`` is.

On a GPU (``--device cuda``): the model and the measurement run there (``science.precision`` for
``--precision bf16``); ``peak_gpu_gb`` is ``torch.cuda.max_memory_allocated`` over the whole run
and ``part_peak_gpu_gb`` per part (the peak reset before each). ``--jsonl FILE`` appends one
object per finished part (``{"label", "part", "seconds", "peak_gpu_gb", "rows", ...}``) as soon as
it finishes, progress lines while it runs, then the summary object (``"part": "total"``): a run
stopped by a time limit keeps the parts it finished. ``--label`` names the run in both.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.floors, run as a script

from benchmarks.floors import FitCounter, Rates, counting_fits, fp32_products
from layerscope_core.registry import TRAIN_LENGTH
from models_store.base import LayerwiseModel
from models_store.cpu_matmul import uses_onednn
from models_store.mamba_kernels import mixer_path
from models_store.pretrained import load_pretrained
from science.bounded import MeasureMemoryError, MemoryBound
from science.context import SilentContext
from science.measure import check_memory, measure_interventions, measure_probes
from science.patching import patching_grid
from science.tasks import get_task
from store.settings import get_settings
from worker.job_params import MeasureParams

PARTS = ("probes", "interventions", "patching")


def _config(family: str, layers: int, d: int, heads: int):
    """A transformers config of the shape (Pythia's proportions: MLP 4·D, rotary on a quarter)."""
    if family == "mamba":
        from transformers import MambaConfig

        return MambaConfig(vocab_size=50280, hidden_size=d, num_hidden_layers=layers, state_size=16, expand=2)
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        vocab_size=50304,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * d,
        rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
    )


def build(family: str, layers: int, d: int, heads: int, task) -> LayerwiseModel:
    """The model of this shape, random weights, through the product's from-config path."""
    with tempfile.TemporaryDirectory() as folder:
        _config(family, layers, d, heads).save_pretrained(folder)
        return load_pretrained(
            str(Path(folder)), n_classes=task.n_classes, task_vocab_size=task.vocab_size, weights=False, seed=0
        ).eval()


class Flops:
    """The forward-pass FLOP arithmetic of one model (module docstring)."""

    def __init__(self, model: LayerwiseModel, family: str) -> None:
        block = model.block_modules()[0]
        self.block = 2 * sum(m.weight.numel() for m in block.modules() if isinstance(m, nn.Linear))
        self.d, self.n_layers, self.attention = model.d_model, model.n_layers, family != "mamba"
        self.head = 2 * model.d_model * model.config.n_classes
        self.prefix = model.n_prefix

    def forward(self, n: int, length: int, first_block: int = 0) -> float:
        """FLOPs of ``n`` sequences of ``length`` through blocks ``first_block``.. and the head."""
        t = length + self.prefix
        per_block = self.block + (4 * t * self.d if self.attention else 0)
        return float(n * t * (per_block * (self.n_layers - first_block)) + n * length * self.head)


def peak_flops(d: int, precision: str = "fp32") -> float:
    """Best matmul rate (FLOP/s) of 5 ``[4096, D] × [D, 4·D]`` products (float32, or bfloat16 at
    ``precision`` bf16), on CPU or CUDA (one warm-up product first); at float32 on a CPU the better
    of torch's BLAS and oneDNN (``benchmarks.floors.fp32_products``)."""
    dev = "cuda" if torch.cuda.is_available() and _device == "cuda" else "cpu"
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(4096, d, device=dev, dtype=dtype), torch.randn(d, 4 * d, device=dev, dtype=dtype)
    products = fp32_products(a, b) if dtype == torch.float32 else [lambda: a @ b]  # BLAS, and oneDNN on a CPU
    best = float("inf")
    for product in products:
        product()
        for _ in range(5):
            if dev == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            product()
            if dev == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
    return 2 * 4096 * d * 4 * d / best


def peak_read_gbps() -> float:
    """Best memory read rate (GB/s) of 5 sums over a 256 MiB float32 tensor, on CPU or CUDA."""
    dev = "cuda" if torch.cuda.is_available() and _device == "cuda" else "cpu"
    big = torch.ones(64 * 1024 * 1024, device=dev)
    big.sum()
    best = float("inf")
    for _ in range(5):
        _sync()
        t = time.perf_counter()
        big.sum()
        _sync()
        best = min(best, time.perf_counter() - t)
    return big.numel() * 4 / best / 1e9


_device = "cpu"


def _sync() -> None:
    if _device == "cuda":
        torch.cuda.synchronize()


def _peak_gpu_gb() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if _device == "cuda" else None


def _append(path: str | None, obj: dict[str, Any]) -> None:
    """One JSON object as a line of ``path`` (appended, flushed at once); nothing without a path."""
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")


class _Progress(SilentContext):
    """A part's progress, a JSON line of ``path`` each time it passes another tenth or starts a
    step of another name, and each log line of the measurement (``"log"``): a part stopped by a
    time limit still says how far it got (``fraction``) after how many ``seconds``, and where the
    time went."""

    def __init__(self, path: str | None, head: dict[str, Any]) -> None:
        super().__init__()
        self.path, self.head, self.t0, self.next = path, head, time.perf_counter(), 0.1
        self.last = ""

    def progress(self, fraction: float, message: str = "") -> None:
        if fraction >= self.next or (message and message != self.last):  # each tenth, and each new step's name
            self.last = message
            self.next = (int(fraction * 10) + 1) / 10
            seconds = round(time.perf_counter() - self.t0, 2)
            _append(self.path, {**self.head, "progress": round(fraction, 3), "seconds": seconds, "message": message})

    def log(self, line: str) -> None:
        """The measurement's log lines (a fit-size doubling, INLP's budget) with the seconds so far."""
        _append(self.path, {**self.head, "log": line, "seconds": round(time.perf_counter() - self.t0, 2)})


def _run_part(
    part: str,
    model: LayerwiseModel,
    task: Any,
    count: Flops,
    args: argparse.Namespace,
    lengths: list[int],
    layers: list[int] | None,
    memory: MemoryBound,
    common: dict[str, Any],
    m: MeasureParams,
) -> tuple[float, int]:
    """Run one part with the product's code (``m``: the measurement settings); the FLOPs of its
    forward passes (the fits are counted by the caller, from the solver's evaluations) and the
    number of rows it made."""
    n = args.sequences
    if part == "probes":
        probes = measure_probes(model, task, eval_lengths=lengths, n_sequences=n, memory=memory, **common)
        return sum(count.forward(n, length) for length in lengths), len(probes)
    if part == "interventions":
        rows = measure_interventions(
            model,
            task,
            eval_lengths=lengths,
            n_sequences=n,
            methods=list(m.methods),
            layers=layers,
            pca_k=m.pca_k,
            inlp_max_rounds=args.inlp_max_rounds or None,
            fit_length=TRAIN_LENGTH,
            n_permutations=m.n_permutations,
            memory=memory,
            **common,
        )
        fit_n = max(r.n_fit_sequences or 0 for r in rows)
        f = count.forward(fit_n, TRAIN_LENGTH) + sum(count.forward(n, length) for length in lengths)
        f += sum(
            count.forward(n, r.eval_length, r.layer + 1) * (1 + (r.random_draws or 0)) for r in rows if r.layer >= 0
        )
        return f, len(rows)
    cells = patching_grid(
        model,
        task,
        eval_length=m.patch_eval_length,
        positions=m.patch_positions,
        sites=m.patch_sites,
        stride=m.patch_stride,
        n_pairs=m.n_patch_pairs,
        **common,
    )
    f = count.forward(m.n_patch_pairs, m.patch_eval_length) * 2
    f += sum(count.forward(m.n_patch_pairs, m.patch_eval_length, max(0, c.layer + 1)) for c in cells)
    return f, len(cells)


def _at_least(low: int):
    """An argparse type: an integer ≥ ``low`` (argparse's one-line error otherwise)."""

    def parse(text: str) -> int:
        value = int(text)  # ValueError: argparse says "invalid parse value"
        if value < low:
            raise argparse.ArgumentTypeError(f"must be ≥ {low}, got {value}")
        return value

    parse.__name__ = f"integer ≥ {low}"
    return parse


def _lengths(text: str) -> list[int]:
    """``--lengths``: comma-separated eval lengths, each ≥ 2."""
    try:
        lengths = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated integers, got {text!r}") from None
    if not lengths or min(lengths) < 2:
        raise argparse.ArgumentTypeError(f"eval lengths ≥ 2, got {text!r}")
    return lengths


def main(argv: list[str] | None = None) -> int:
    global _device
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=_at_least(1), required=True)
    ap.add_argument("--d-model", type=_at_least(1), required=True)
    ap.add_argument("--heads", type=_at_least(1), default=12, help="attention heads (divide --d-model; default 12)")
    ap.add_argument("--sequences", type=_at_least(2), default=200, help="sequences measured (default 200)")
    ap.add_argument("--lengths", type=_lengths, default="40", help="eval lengths, comma-separated (default 40)")
    ap.add_argument("--parts", default="probes,interventions,patching", help=f"some of {','.join(PARTS)} (default all)")
    ap.add_argument("--interv-layers", default="all", help="all | i,j,... (intervention layers)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--family", default="gpt_neox", choices=["gpt_neox", "mamba"])
    ap.add_argument("--task", default="dyck", help="a task name (default dyck)")
    ap.add_argument("--inlp-max-rounds", type=int, default=8, help="INLP's round budget (0: uncapped)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="the forward passes'")
    ap.add_argument("--jsonl", default=None, help="append one JSON line per finished part, then the summary")
    ap.add_argument("--label", default="", help="a name for this run in the output")
    ap.add_argument("--patch-pairs", type=int, default=None, help="patching pairs (default: MeasureParams')")
    ap.add_argument("--patch-length", type=int, default=None, help="patching length (default: MeasureParams')")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here")
    _device = args.device
    parts = [p for p in args.parts.split(",") if p]
    if bad := [p for p in parts if p not in PARTS]:
        ap.error(f"--parts: unknown {bad}; expected some of {list(PARTS)}")
    lengths = args.lengths
    if args.family == "gpt_neox" and args.d_model % args.heads:
        ap.error(f"--heads {args.heads} must divide --d-model {args.d_model}")
    try:
        task = get_task(args.task)
    except ValueError as exc:
        ap.error(f"--task: {exc}")
    layers = None
    if args.interv_layers != "all":
        try:
            layers = [int(x) for x in args.interv_layers.split(",")]
        except ValueError:
            ap.error(f"--interv-layers: expected all or whole numbers i,j,..., got {args.interv_layers!r}")
        if bad_layers := [i for i in layers if not -1 <= i < args.layers]:
            ap.error(
                f"--interv-layers: {bad_layers} out of range for a {args.layers}-layer model (-1..{args.layers - 1})"
            )
    if args.inlp_max_rounds < 0:
        ap.error(f"--inlp-max-rounds must be ≥ 0 (0: uncapped), got {args.inlp_max_rounds}")
    model = build(args.family, args.layers, args.d_model, args.heads, task).to(args.device)
    memory = MemoryBound.of_gib(get_settings().measure_memory_gb)
    m = MeasureParams()
    m.n_patch_pairs = args.patch_pairs or m.n_patch_pairs
    m.patch_eval_length = args.patch_length or m.patch_eval_length
    try:  # refused in one line before any work, as the worker refuses it
        check_memory(
            model,
            task,
            memory,
            eval_lengths=lengths,
            n_sequences=args.sequences,
            probes="probes" in parts,
            methods=list(m.methods) if "interventions" in parts else None,
            layers=layers,
        )
    except MeasureMemoryError as exc:
        print(f"bench_scale: {exc}", file=sys.stderr)
        return 2
    count = Flops(model, args.family)
    rate_before, gbps_before = peak_flops(args.d_model, args.precision), peak_read_gbps()
    # the solvers run in float32 at every precision: their floor is counted at the float32 rate
    fit_rate_before = rate_before if args.precision == "fp32" else peak_flops(args.d_model)
    common = dict(run_seed=0, config_hash="bench", device=args.device, precision=args.precision)
    spent: dict[str, float] = {}
    part_peaks: dict[str, float | None] = {}
    label = {"label": args.label, "family": args.family, "layers": args.layers, "d_model": args.d_model}
    cpu = time.process_time()
    flops: dict[str, float] = {}
    forward_flops: dict[str, float] = {}
    solver: dict[str, tuple[int, int]] = {}  # per part: (probe fits, solver evaluations)
    part_fits: dict[str, FitCounter] = {}  # per part: its fits' (N, D, K, evaluations)
    n = args.sequences
    for part in parts:
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        _sync()
        t = time.perf_counter()
        ctx = _Progress(args.jsonl, {**label, "part": part, "precision": args.precision})
        with counting_fits() as fits:
            f, n_made = _run_part(part, model, task, count, args, lengths, layers, memory, {**common, "ctx": ctx}, m)
        _sync()
        spent[part], part_fits[part] = time.perf_counter() - t, fits
        f_fits = sum(evals * 4 * n_rows * d * k for n_rows, d, k, evals in fits.fits)
        forward_flops[part], flops[part] = f, f + f_fits
        solver[part] = (len(fits.fits), fits.evals)
        part_peaks[part] = _peak_gpu_gb()
        _append(
            args.jsonl,
            {
                **label,
                "part": part,
                "precision": args.precision,
                "device": args.device,
                "seconds": round(spent[part], 2),
                "peak_gpu_gb": part_peaks[part],
                "rows": n_made,
                "flops": f,
            },
        )
    # the best of the rates timed before and after the parts: a moment of load at either end does
    # not lower the floor (a higher rate only raises the ratio)
    rate = max(rate_before, peak_flops(args.d_model, args.precision))
    gbps = max(gbps_before, peak_read_gbps())
    fit_rate = rate if args.precision == "fp32" else max(fit_rate_before, peak_flops(args.d_model))
    # each evaluation at the larger of its FLOPs and its reads of the rows, as floors.py counts it
    fit_floors = {k: v.eval_floor(Rates(gflops=fit_rate / 1e9, gbps=gbps)) for k, v in part_fits.items()}
    part_floor = {k: forward_flops[k] / rate + fit_floors[k] for k in flops}
    total, seconds = sum(flops.values()), sum(spent.values())
    floor = sum(part_floor.values())
    out = {
        "mixer_path": mixer_path(model, args.precision),  # Mamba: CPU fast path, mamba-ssm kernels or pure PyTorch
        # the large float32 linear layers' product on a CPU (models_store.cpu_matmul): "onednn" or "blas"
        "cpu_matmul": ("onednn" if uses_onednn() else "blas")
        if (args.device, args.precision) == ("cpu", "fp32")
        else None,
        "label": args.label,
        "precision": args.precision,
        "device": args.device,
        "family": args.family,
        "layers": args.layers,
        "d_model": args.d_model,
        "n_params": sum(p.numel() for p in model.parameters()),
        "sequences": n,
        "lengths": lengths,
        "memory_gb": None if memory.limit is None else memory.limit / 2**30,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(
            time.process_time() - cpu, 2
        ),  # this process's CPU time (a loaded machine: < wall × threads)
        "parts": {k: round(v, 2) for k, v in spent.items()},
        "flops": total,
        "part_flops": flops,
        "peak_flops": rate,
        "peak_flops_fp32": fit_rate,  # the solvers' rate (float32 at every precision)
        "peak_read_gbps": round(gbps, 2),
        "floor_seconds": round(floor, 4),
        "part_floor_seconds": {k: round(v, 4) for k, v in part_floor.items()},
        "fit_floor_seconds": {k: round(v, 4) for k, v in fit_floors.items()},
        "part_fits": {k: {"fits": v[0], "evaluations": v[1]} for k, v in solver.items()},
        "ratio": round(seconds / floor, 2) if floor else None,
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30, 3),
    }
    if args.device == "cuda":
        out["peak_gpu_gb"] = max((p for p in part_peaks.values() if p is not None), default=_peak_gpu_gb())
        out["part_peak_gpu_gb"] = part_peaks
        out["gpu"] = torch.cuda.get_device_name()
    _append(args.jsonl, {**out, "part": "total"})
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
