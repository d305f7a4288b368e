"""Which sequences train and test a probe, and the control task's labels (docs/SCIENCE.md#probes,
#selectivity): a seeded split by sequence, stratified by each sequence's label mix, and one
fixed random label per (token type, position bucket)."""

from __future__ import annotations

import torch
from torch import Tensor


def split_sequences(
    n: int, test_frac: float = 0.2, seed: int = 0, strata: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Seeded split of ``n`` sequence indices → ``(train_idx, test_idx)`` (CPU long tensors, sorted).

    ``n_test = round(n · test_frac)``, at least 1 and at most ``n − 1`` when ``n ≥ 2``. With
    ``strata [n]`` (one integer per sequence, e.g. :func:`sequence_strata`) the split is
    stratified (``sklearn.model_selection.StratifiedShuffleSplit``): each stratum is split in
    the same proportion. Strata with a single sequence are pooled (a one-member stratum cannot
    be split); if that pool is itself a single sequence it joins the largest stratum.

    Raises:
        ValueError: ``n < 2``, ``test_frac`` outside (0, 1), ``strata`` not of length n.
    """
    if n < 2:
        raise ValueError(f"need at least 2 sequences to split, got {n}")
    if not 0.0 < test_frac < 1.0:
        raise ValueError(f"test_frac must be in (0, 1), got {test_frac}")
    n_test = min(max(1, round(n * test_frac)), n - 1)
    if strata is not None:
        st = torch.as_tensor(strata).reshape(-1).cpu().long()
        if st.numel() != n:
            raise ValueError(f"strata has {st.numel()} entries for {n} sequences")
        st = _pool_small_strata(st)
        n_groups = int(st.unique().numel())
        if 1 < n_groups <= min(n_test, n - n_test):
            from sklearn.model_selection import StratifiedShuffleSplit

            sss = StratifiedShuffleSplit(n_splits=1, test_size=n_test, random_state=seed)
            tr, te = next(sss.split(torch.zeros(n, 1).numpy(), st.numpy()))
            return torch.as_tensor(tr).sort().values, torch.as_tensor(te).sort().values
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g)
    return perm[n_test:].sort().values, perm[:n_test].sort().values


def _pool_small_strata(st: Tensor) -> Tensor:
    values, counts = st.unique(return_counts=True)
    small = values[counts < 2]
    if small.numel() == 0:
        return st
    out = st.clone()
    pool = int(values.max()) + 1
    out[torch.isin(st, small)] = pool
    if int((out == pool).sum()) < 2:
        big = values[counts.argmax()]
        out[out == pool] = big
    return out


def sequence_strata(labels: Tensor, n_classes: int, n_bins: int = 4, max_strata: int | None = None) -> Tensor:
    """One stratum per sequence from its label mix: ``[n, L]`` labels (< 0 ignored) → ``[n]``.

    The stratum is (most frequent label, share of that label binned into ``n_bins`` equal bins),
    so sequences that are nearly all one class and mixed sequences fall in different strata.
    With more than ``max_strata`` distinct strata, the most frequent label alone.
    """
    lab = labels.reshape(labels.shape[0], -1).cpu().long()
    valid = lab >= 0
    counts = torch.nn.functional.one_hot(lab.clamp_min(0), n_classes) * valid[..., None]  # [n, L, C]
    counts = counts.sum(1)  # [n, C]
    top = counts.argmax(1)
    share = counts.max(1).values.double() / valid.sum(1).clamp_min(1)
    b = (share * n_bins).floor().clamp_max(n_bins - 1).long()
    st = top * n_bins + b
    if max_strata is not None and int(st.unique().numel()) > max_strata:
        return top
    return st


CONTROL_BUCKET = 5  # positions per bucket of the control task (docs/SCIENCE.md#selectivity)


def control_labels(
    tokens: Tensor, labels: Tensor, n_classes: int, seed: int = 0, bucket: int | None = CONTROL_BUCKET
) -> Tensor:
    """The control task: one fixed random label per (input-token type, position bucket), drawn from
    the empirical label distribution; unlabelled positions (< 0) stay unlabelled.

    Hewitt & Liang (2019, "Designing and Interpreting Probes with Control Tasks", EMNLP, §2)
    give each token *type* a random label. With the formal tasks' 2–6 types (and even with
    code_depth's hundreds) that label is read off the token itself at every layer (control
    accuracy 0.90–1.00), so selectivity says nothing. Crossing the type with the position bucket
    ``t // bucket`` makes a label that no function of the token alone predicts, nor one of the
    position alone; a probe reads it only from states that keep both, in a form a linear map
    can separate: what "selectivity" then measures (docs/SCIENCE.md#selectivity).

    Args:
        tokens: ``[n, L]`` input token ids (≥ 0).
        labels: ``[n, L]`` the real labels (for the label distribution and the mask).
        bucket: positions per bucket (≥ 1); None = Hewitt & Liang's per-type control.

    Returns:
        ``[n, L]`` control labels on ``labels``' device.

    Raises:
        ValueError: shapes differ, or ``bucket`` < 1.
    """
    if tokens.shape != labels.shape:
        raise ValueError(f"tokens {tuple(tokens.shape)} and labels {tuple(labels.shape)} differ in shape")
    if bucket is not None and bucket < 1:
        raise ValueError(f"bucket must be >= 1 positions, got {bucket}")
    tok = tokens.cpu().long().clamp_min(0)
    lab = labels.cpu().long()
    valid = lab >= 0
    dist = torch.bincount(lab[valid], minlength=n_classes).double()
    g = torch.Generator().manual_seed(seed)
    n_types = int(tok.max()) + 1 if tok.numel() else 1
    n_buckets = 1 if bucket is None else -(-tok.shape[-1] // bucket)
    table = torch.multinomial(dist.clamp_min(0) + (dist.sum() == 0), n_types * n_buckets, replacement=True, generator=g)
    pos_bucket = torch.zeros_like(tok) if bucket is None else (torch.arange(tok.shape[-1]) // bucket).expand_as(tok)
    ctrl = torch.where(valid, table[tok * n_buckets + pos_bucket], torch.full_like(lab, -100))
    return ctrl.to(labels.device)
