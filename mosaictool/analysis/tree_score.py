"""Tree-score (Murty et al., ICLR 2023): how tree-like a text encoder's computation is.

For every span p = (a, b) of a caption's whitespace words, SCI compares the span's contextual
vector v_p (sum of its token states after `ln_final`, one unmasked pass) with its context-free
vector ṽ_p (the same tokens at the same positions, but from layer k on their attention keys are
only SOT and the span itself). The chart c(p) = cos(v_p, ṽ_p) is projected onto a binary tree;
the tree-score is how much better that tree scores than random binary trees.

CLIP text towers are causal, so one row per start word a, whose keys are SOT and every token from
word a on, gives ṽ for every span (a, b) at once (a token never sees what comes after it): n rows
per caption instead of n(n+1)/2 (`charts_prefix`). Since a token never attends to anything but
SOT and the span in those layers, the rows are also *compacted*: tokens before word a are dropped
and the row starts from the contextual pass's state at layer k, so only the causal mask is needed.
`charts_per_span` is the literal definition (one explicitly masked row per span), kept as the
reference the fast path is tested against. See docs/tree_score.md for every choice made here.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mosaictool.errors import MosaicError

POSITIONS = ("original", "shifted")
SKIP_REASONS = ("too_short", "too_long", "context", "alignment")
# Chart values are rounded before projection: below the forward pass's fp32 noise, and it lets
# exact ties (a non-contextual encoder) resolve by the authors' rule (first split) instead of noise.
CHART_DECIMALS = 6


# ---------------------------------------------------------------------------------------------
# The text tower of an open_clip model


@dataclass
class TextTower:
    token_embedding: Any
    positional_embedding: Any  # [num_pos, width]
    blocks: Any  # transformer.resblocks
    ln_final: Any
    causal_mask: Any  # [num_pos, num_pos] additive float mask
    heads: int
    batch_first: bool
    context_length: int

    @property
    def n_layers(self) -> int:
        return len(self.blocks)


def text_tower(model) -> TextTower:
    """The text modules of a CLIP (on the model) or CustomTextCLIP (on `model.text`)."""
    model = model.module if hasattr(model, "module") else model
    src = model.text if getattr(model, "text", None) is not None else model
    if not hasattr(src, "token_embedding") or not hasattr(src, "transformer"):
        raise MosaicError(
            f"tree-score needs an open_clip TextTransformer text tower; {type(src).__name__} (e.g. a Hugging Face "
            "text encoder) is not supported"
        )
    if getattr(src, "attn_mask", None) is None:
        raise MosaicError(
            "this text tower is bidirectional (no causal mask); tree-score supports causal CLIP text towers only"
        )
    blocks = src.transformer.resblocks
    return TextTower(
        token_embedding=src.token_embedding,
        positional_embedding=src.positional_embedding,
        blocks=blocks,
        ln_final=src.ln_final,
        causal_mask=src.attn_mask,
        heads=blocks[0].attn.num_heads,
        batch_first=getattr(src.transformer, "batch_first", True),
        context_length=getattr(src, "context_length", src.positional_embedding.shape[0]),
    )


# ---------------------------------------------------------------------------------------------
# Captions -> words -> tokens


@dataclass
class Prepared:
    """A caption ready for scoring: ids = [SOT] + word tokens (EOT is dropped: under causality it
    can affect no word token); wspan[w] = (t0, t1) token range of word w in ids, t1 exclusive."""

    words: list[str]
    ids: list[int]
    wspan: list[tuple[int, int]]


def caption_words(text: str) -> list[str]:
    """Whitespace words, with one trailing '.' stripped (COCO captions end in one half the time;
    keeping it would add a leaf that carries no structure)."""
    words = text.split()
    if words and words[-1].endswith("."):
        last = words[-1][:-1]
        words = words[:-1] + ([last] if last else [])
    return words


def prepare(text: str, tokenizer, *, max_words: int, context_length: int) -> Prepared | str:
    """Tokenise word by word and check that the pieces add up to the caption's own encoding.
    Returns the prepared caption or a skip reason."""
    words = caption_words(text)
    if len(words) < 2:
        return "too_short"
    if len(words) > max_words:
        return "too_long"
    pieces = [tokenizer.encode(w) for w in words]
    if any(not p for p in pieces) or [t for p in pieces for t in p] != tokenizer.encode(" ".join(words)):
        return "alignment"
    if sum(map(len, pieces)) + 2 > context_length:  # + SOT and EOT, as the model would see them
        return "context"
    ids, wspan = [tokenizer.sot_token_id], []
    for p in pieces:
        wspan.append((len(ids), len(ids) + len(p)))
        ids.extend(p)
    return Prepared(words, ids, wspan)


def check_tokenizer(tokenizer) -> None:
    if not all(hasattr(tokenizer, a) for a in ("encode", "sot_token_id")):
        raise MosaicError(
            f"tree-score aligns words to tokens with open_clip's SimpleTokenizer; {type(tokenizer).__name__} "
            "is not supported"
        )


# ---------------------------------------------------------------------------------------------
# Charts


def _run_blocks(tower: TextTower, x, layers: Iterable[int], masks):
    """x: [B, L, W] batch-first; masks(i) gives block i's additive attention mask."""
    if not tower.batch_first:
        x = x.transpose(0, 1)
    for i in layers:
        x = tower.blocks[i](x, attn_mask=masks(i))
    return x.transpose(0, 1) if not tower.batch_first else x


def _pad(seqs: Sequence, width: int, dtype):
    import torch

    out = torch.zeros(len(seqs), max(len(s) for s in seqs), width, dtype=dtype, device=seqs[0].device)
    for r, s in enumerate(seqs):
        out[r, : len(s)] = s
    return out


def _cast_dtype(tower: TextTower):
    return tower.blocks[0].mlp.c_fc.weight.dtype


BUCKET = 4  # rows are padded to a multiple of this many tokens
MIN_BATCH_TOKENS = 64  # and a forward call has at least this many (zero rows added)


def _forward(tower: TextTower, seqs: Sequence, start_layer: int, capture_layer: int | None = None, max_tokens: int = 8192):
    """Run blocks start_layer.. on each [L, W] sequence (layer inputs) with the causal mask; return
    per sequence the states after ln_final and, if asked, the input of block `capture_layer`.

    A sequence's result must not depend on which other captions share its batch (so --batch-size
    changes nothing): its padded length depends only on its own length (right padding, hidden by
    the causal mask), and every call is large enough that the BLAS picks its regular kernel (tiny
    matrices take another path with another fp32 summation order)."""
    groups: dict[int, list[int]] = {}
    for r, x in enumerate(seqs):
        groups.setdefault(-(-len(x) // BUCKET) * BUCKET, []).append(r)
    outs: list[Any] = [None] * len(seqs)
    captured: list[Any] = [None] * len(seqs)
    for L, members in sorted(groups.items()):
        causal = tower.causal_mask[:L, :L].to(seqs[members[0]].dtype)
        step = max(1, max_tokens // L)
        for start in range(0, len(members), step):
            chunk = members[start : start + step]
            x = seqs[chunk[0]].new_zeros(max(len(chunk), -(-MIN_BATCH_TOKENS // L)), L, seqs[chunk[0]].shape[-1])
            for j, r in enumerate(chunk):
                x[j, : len(seqs[r])] = seqs[r]
            if not tower.batch_first:
                x = x.transpose(0, 1)
            cap = None
            for i in range(start_layer, tower.n_layers):
                if i == capture_layer:
                    cap = x
                x = tower.blocks[i](x, attn_mask=causal)
            if not tower.batch_first:
                x = x.transpose(0, 1)
                cap = cap.transpose(0, 1) if cap is not None else None
            h = tower.ln_final(x)
            for j, r in enumerate(chunk):
                outs[r] = h[j, : len(seqs[r])]
                captured[r] = cap[j, : len(seqs[r])] if cap is not None else None
    return outs, captured


def _embed(tower: TextTower, ids: Sequence[int]):
    import torch

    dtype = _cast_dtype(tower)
    ids = torch.tensor(ids, device=tower.positional_embedding.device)
    return tower.token_embedding(ids).to(dtype) + tower.positional_embedding[: len(ids)].to(dtype)


def _contextual(tower: TextTower, items: Sequence[Prepared], capture_layer: int, max_tokens: int = 8192):
    """One causal pass per caption at its true length (under causality, the model's padding comes
    after every real token and changes nothing). Returns per caption (states after ln_final [T, W],
    the input of block `capture_layer` [T, W])."""
    emb = [_embed(tower, it.ids) for it in items]
    outs, captured = _forward(tower, emb, 0, capture_layer, max_tokens)
    return [(o, emb[i] if capture_layer == 0 else c) for i, (o, c) in enumerate(zip(outs, captured))]


def _cos_chart(n: int, ctx_sums, cf_sums) -> np.ndarray:
    """ctx_sums/cf_sums: dict (a, b) -> float64 vector. Upper triangle filled, NaN below."""
    c = np.full((n, n), np.nan)
    for (a, b), v in ctx_sums.items():
        u = cf_sums[(a, b)]
        c[a, b] = float(np.dot(u, v) / max(np.linalg.norm(u) * np.linalg.norm(v), 1e-30))
    return c


def charts_prefix(
    tower: TextTower,
    items: Sequence[Prepared],
    *,
    layer_threshold: int = 0,
    positions: str = "original",
    max_tokens: int = 8192,
) -> list[np.ndarray]:
    """Similarity charts c[a, b] (a <= b) for a batch of captions, with prefix sharing."""
    import torch

    k = _check_threshold(tower, layer_threshold, positions)
    with torch.inference_mode():
        ctx = _contextual(tower, items, k, max_tokens)
        # One row per (caption, start word a): [SOT] + the tokens from word a on, as layer-k input.
        keys, seqs = [], []
        for ci, it in enumerate(items):
            T = len(it.ids)
            for a, (s, _) in enumerate(it.wspan):
                keep = [0, *range(s, T)]
                if positions == "original":
                    seqs.append(ctx[ci][1][keep])
                else:  # the span renumbered to positions 1..m, as if run alone
                    seqs.append(_embed(tower, [it.ids[t] for t in keep]))
                keys.append((ci, a))
        row_states, _ = _forward(tower, seqs, k, max_tokens=max_tokens)
        outs = {key: h[1:] for key, h in zip(keys, row_states)}  # drop SOT
        charts = []
        for ci, it in enumerate(items):
            n = len(it.words)
            cc = _prefix_sums(ctx[ci][0])  # cc[t] = sum of states of tokens < t
            ctx_sums, cf_sums = {}, {}
            for a in range(n):
                s = it.wspan[a][0]
                cf = _prefix_sums(outs[(ci, a)])  # cf[j] = sum of the first j tokens from s
                for b in range(a, n):
                    e = it.wspan[b][1]
                    ctx_sums[(a, b)] = cc[e] - cc[s]
                    cf_sums[(a, b)] = cf[e - s]
            charts.append(_cos_chart(n, ctx_sums, cf_sums))
    return charts


def _prefix_sums(h) -> np.ndarray:
    h = h.double().cpu().numpy()
    out = np.zeros((h.shape[0] + 1, h.shape[1]))
    np.cumsum(h, axis=0, out=out[1:])
    return out


def charts_per_span(
    tower: TextTower,
    items: Sequence[Prepared],
    *,
    layer_threshold: int = 0,
    positions: str = "original",
    max_rows: int = 64,
) -> list[np.ndarray]:
    """The literal definition: one row per span over the whole caption, layers < k causal only,
    layers >= k with an additive key mask {SOT} + span (every query, in the (B*heads, T, T) layout
    open_clip uses). With positions='shifted', [SOT] + span run alone at positions 0..m.
    Quadratically many rows: the reference `charts_prefix` is tested against, and the perf baseline."""
    import torch

    k = _check_threshold(tower, layer_threshold, positions)
    dtype = _cast_dtype(tower)
    with torch.inference_mode():
        ctx = _contextual(tower, items, k)
        spans = [(ci, a, b) for ci, it in enumerate(items) for a in range(len(it.words)) for b in range(a, len(it.words))]
        sums: dict[tuple[int, int, int], np.ndarray] = {}
        for start in range(0, len(spans), max_rows):
            chunk = spans[start : start + max_rows]
            seqs, keymasks, token_ranges = [], [], []
            for ci, a, b in chunk:
                it = items[ci]
                s, e = it.wspan[a][0], it.wspan[b][1]
                if positions == "original":
                    x = _embed(tower, it.ids)
                    keys = torch.zeros(len(it.ids), dtype=torch.bool, device=x.device)
                    keys[0] = True
                    keys[s:e] = True
                    token_ranges.append((s, e))
                else:
                    x = _embed(tower, [it.ids[0], *it.ids[s:e]])
                    keys = torch.ones(len(x), dtype=torch.bool, device=x.device)
                    token_ranges.append((1, len(x)))
                seqs.append(x)
                keymasks.append(keys)
            x = _pad(seqs, seqs[0].shape[-1], dtype)
            L = x.shape[1]
            causal = tower.causal_mask[:L, :L].to(dtype)
            bias = torch.full((len(chunk), L), float("-inf"), dtype=dtype, device=x.device)
            for r, keys in enumerate(keymasks):
                bias[r, : len(keys)][keys] = 0.0
            span_mask = (causal[None] + bias[:, None, :]).repeat_interleave(tower.heads, 0)
            h = tower.ln_final(_run_blocks(tower, x, range(tower.n_layers), lambda i: causal if i < k else span_mask))
            for r, span in enumerate(chunk):
                s, e = token_ranges[r]
                sums[span] = h[r, s:e].double().sum(0).cpu().numpy()
        charts = []
        for ci, it in enumerate(items):
            n = len(it.words)
            states = ctx[ci][0].double().cpu().numpy()
            ctx_sums = {
                (a, b): states[it.wspan[a][0] : it.wspan[b][1]].sum(0) for a in range(n) for b in range(a, n)
            }
            charts.append(_cos_chart(n, ctx_sums, {(a, b): sums[(ci, a, b)] for a, b in ctx_sums}))
    return charts


def _check_threshold(tower: TextTower, k: int, positions: str) -> int:
    if positions not in POSITIONS:
        raise MosaicError(f"--positions must be one of {', '.join(POSITIONS)}, not {positions!r}")
    if not 0 <= k < tower.n_layers:
        raise MosaicError(f"--layer-threshold must be in 0..{tower.n_layers - 1} for this {tower.n_layers}-layer tower")
    if positions == "shifted" and k > 0:
        raise MosaicError(
            "--positions shifted runs each span alone, which has no first layers with full context; use it with "
            "--layer-threshold 0"
        )
    return k


# ---------------------------------------------------------------------------------------------
# Projection


def project_greedy(c, rng, normalize: bool = True) -> tuple[Any, float]:
    """The authors' greedy top-down projection (TreeProjections, "Algorithm 1"): split each node at
    the first argmax of c[i,k] + c[k+1,j]; with `normalize`, subtract the value of ONE random split
    of the same node, drawn before recursing left then right. Leaves are word indices."""

    def rec(i: int, j: int):
        if i == j:
            return i, 0.0
        best_k, best = i, c[i][i] + c[i + 1][j]
        for k in range(i + 1, j):
            s = c[i][k] + c[k + 1][j]
            if s > best:
                best_k, best = k, s
        if normalize:
            r = rng.choice(range(i, j))
            best -= c[i][r] + c[r + 1][j]
        left, sl = rec(i, best_k)
        right, sr = rec(best_k + 1, j)
        return (left, right), sl + sr + best

    return rec(0, len(c) - 1)


def project_exact(c) -> tuple[Any, float, float]:
    """Exact CKY argmax B and the expectation E under random-split trees (each split uniform, as
    tree_utils.random_parse draws them). Returns (argmax tree, B[0, n-1], E[0, n-1])."""
    n = len(c)
    B = np.zeros((n, n))
    E = np.zeros((n, n))
    split = np.zeros((n, n), dtype=int)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            vals = [c[i][k] + c[k + 1][j] + B[i, k] + B[k + 1, j] for k in range(i, j)]
            best = int(np.argmax(vals))  # first maximum: ties split at k = i, as the greedy rule
            B[i, j], split[i, j] = vals[best], i + best
            E[i, j] = sum(c[i][k] + c[k + 1][j] + E[i, k] + E[k + 1, j] for k in range(i, j)) / (j - i)

    def build(i: int, j: int):
        if i == j:
            return i
        k = int(split[i, j])
        return (build(i, k), build(k + 1, j))

    return build(0, n - 1), float(B[0, n - 1]), float(E[0, n - 1])


def caption_rng(seed: int, index: int) -> random.Random:
    """Per-caption RNG: a caption's random splits depend on the seed and its input position only,
    never on batch size or on which other captions were scored."""
    return random.Random(seed * 1_000_003 + index)


def score_chart(c: np.ndarray, rng) -> dict:
    c = np.round(c, CHART_DECIMALS).tolist()
    tree, tscore = project_greedy(c, rng, normalize=True)
    tree_exact, best, expected = project_exact(c)
    return {"tree": tree, "tscore": tscore, "tree_exact": tree_exact, "tscore_exact": best - expected}


# ---------------------------------------------------------------------------------------------
# Trees: strings, brackets, parse accuracy


def tree_string(tree, words: Sequence[str]) -> str:
    """`(a ((man riding) horse))`: a binary tree over the words, leaves as words."""
    if isinstance(tree, int):
        return words[tree]
    return f"({tree_string(tree[0], words)} {tree_string(tree[1], words)})"


_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_tree(value) -> Any:
    """A gold tree: an unlabeled bracketed string `(a (man (rides (a horse))))` (n-ary allowed) or
    a nested JSON list of words. Returns nested lists with words as leaves; an empty tree or node,
    or a leaf that is not a word (a number, null), is a ValueError."""
    if isinstance(value, list):
        return _check_node(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a bracketed string or a nested list, got {type(value).__name__}")
    tokens = _TOKEN.findall(value)
    stack: list[list] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) < 2:
                raise ValueError("unbalanced ')'")
            node = stack.pop()
            stack[-1].append(node)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    top = stack[0]
    return _check_node(top[0] if len(top) == 1 else top)


def _check_node(node):
    if isinstance(node, list):
        if not node:
            raise ValueError("an empty bracket: every node holds a word or a subtree")
        for child in node:
            _check_node(child)
    elif not isinstance(node, str) or not node.strip():
        raise ValueError(f"leaf {node!r} is not a word: leaves are the caption's words, as strings")
    return node


def tree_leaves(tree) -> list:
    if not isinstance(tree, (list, tuple)):
        return [tree]
    return [leaf for child in tree for leaf in tree_leaves(child)]


def brackets(tree) -> set[tuple[int, int]]:
    """Spans (i, j) of every internal node covering >= 2 words, root included, after binarising
    n-ary nodes to the right, (t0, (t1, (t2, ...))), and collapsing unary chains."""
    out: set[tuple[int, int]] = set()

    def rec(node, start: int) -> int:
        if not isinstance(node, (list, tuple)):
            return start + 1
        children = list(node)
        if len(children) == 1:
            return rec(children[0], start)
        if len(children) > 2:
            children = [children[0], children[1:]]
        mid = rec(children[0], start)
        end = rec(children[1], mid)
        if end - start >= 2:
            out.add((start, end - 1))
        return end

    rec(tree, 0)
    return out


def right_branching(n: int):
    return 0 if n == 1 else (0, _shift(right_branching(n - 1), 1))


def _shift(tree, by: int):
    return tree + by if isinstance(tree, int) else (_shift(tree[0], by), _shift(tree[1], by))


def bracket_prf(pairs: Iterable[tuple[set, set]]) -> dict:
    """Corpus-level unlabeled bracket precision, recall and F1 over (predicted, gold) bracket sets."""
    hit = n_pred = n_gold = 0
    for pred, gold in pairs:
        hit += len(pred & gold)
        n_pred += len(pred)
        n_gold += len(gold)
    p = hit / n_pred if n_pred else float("nan")
    r = hit / n_gold if n_gold else float("nan")
    f = 2 * p * r / (p + r) if n_pred and n_gold and p + r > 0 else 0.0 if n_pred and n_gold else float("nan")
    return {"precision": p, "recall": r, "f1": f}


# ---------------------------------------------------------------------------------------------
# Summaries


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap 95% interval (scipy.stats.bootstrap, resampled 200 at a time to bound
    memory on large caption sets)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(v) == 1:
        return float(v[0]), float("nan"), float("nan")
    ci = stats.bootstrap((v,), np.mean, n_resamples=n_boot, batch=200, method="percentile", confidence_level=0.95,
                         rng=np.random.default_rng(seed)).confidence_interval
    return float(v.mean()), float(ci.low), float(ci.high)


@dataclass
class ModelSummary:
    model: str
    scores: dict[Any, dict] = field(default_factory=dict)  # caption index -> {tscore, tscore_exact}
    skipped: dict[str, int] = field(default_factory=dict)
    gold_pairs: list | None = None  # (pred greedy, pred exact, gold, n) bracket sets; None: no gold given
    gold_mismatch: int = 0


def summarize(summaries: Sequence[ModelSummary], *, seed: int = 0) -> dict:
    out: dict = {"models": [], "paired": []}
    for s in summaries:
        row = {"model": s.model, "n": len(s.scores), "skipped": {r: s.skipped[r] for r in SKIP_REASONS if r in s.skipped}}
        for key in ("tscore", "tscore_exact"):
            row[key] = bootstrap_ci([v[key] for v in s.scores.values()], seed=seed)
        if s.gold_pairs is not None:
            row["gold"] = {
                "n": len(s.gold_pairs),
                "mismatched": s.gold_mismatch,
                "greedy": bracket_prf((p, g) for p, _, g, _ in s.gold_pairs),
                "exact": bracket_prf((p, g) for _, p, g, _ in s.gold_pairs),
                "right_branching": bracket_prf((brackets(right_branching(n)), g) for _, _, g, n in s.gold_pairs),
            }
        out["models"].append(row)
    for i, a in enumerate(summaries):
        for b in summaries[i + 1 :]:
            common = sorted(set(a.scores) & set(b.scores))
            pair = {"a": a.model, "b": b.model, "n": len(common)}
            for key in ("tscore", "tscore_exact"):
                pair[key] = bootstrap_ci([b.scores[c][key] - a.scores[c][key] for c in common], seed=seed)
            out["paired"].append(pair)
    return out


def _fmt(ci: tuple[float, float, float]) -> str:
    mean, lo, hi = ci
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.4f} [{lo:.4f}, {hi:.4f}]" if not math.isnan(lo) else f"{mean:.4f}"


def summary_text(summary: dict, settings: dict | None = None, markdown: bool = False) -> str:
    lines = []
    if markdown:
        lines += ["# Tree-score report", ""]
        if settings:
            lines += [", ".join(f"{k}={v}" for k, v in settings.items()), ""]
        lines += ["| model | captions scored | skipped | tscore (greedy) [95% CI] | tscore_exact [95% CI] |",
                  "|---|---:|---|---|---|"]
    for m in summary["models"]:
        skipped = ", ".join(f"{k} {v}" for k, v in m["skipped"].items() if v) or "none"
        if markdown:
            lines.append(f"| {m['model']} | {m['n']} | {skipped} | {_fmt(m['tscore'])} | {_fmt(m['tscore_exact'])} |")
        else:
            lines.append(
                f"{m['model']}: {m['n']} captions scored (skipped: {skipped}); tscore {_fmt(m['tscore'])}; "
                f"tscore_exact {_fmt(m['tscore_exact'])}"
            )
    lines += _paired_lines(summary["paired"], markdown)
    lines += _gold_lines([m for m in summary["models"] if "gold" in m], markdown)
    return "\n".join(lines) + "\n"


def _paired_lines(paired: list[dict], markdown: bool) -> list[str]:
    lines = []
    if paired and markdown:
        lines += ["", "Paired differences (b − a) on the captions both models scored:", "",
                  "| a | b | captions | Δ tscore [95% CI] | Δ tscore_exact [95% CI] |", "|---|---|---:|---|---|"]
    for p in paired:
        if markdown:
            lines.append(f"| {p['a']} | {p['b']} | {p['n']} | {_fmt(p['tscore'])} | {_fmt(p['tscore_exact'])} |")
        else:
            lines.append(
                f"{p['b']} - {p['a']} ({p['n']} paired captions): tscore {_fmt(p['tscore'])}; "
                f"tscore_exact {_fmt(p['tscore_exact'])}"
            )
    return lines


def _gold_lines(gold: list[dict], markdown: bool) -> list[str]:
    lines = []
    if gold and markdown:
        lines += ["", "Unlabeled bracket F1 against the gold trees (corpus level):", "",
                  "| model | trees | leaves mismatched | greedy P / R / F1 | exact F1 | right-branching F1 |",
                  "|---|---:|---:|---|---:|---:|"]
    for m in gold:
        g = m["gold"]
        prf = "{precision:.4f} / {recall:.4f} / {f1:.4f}".format(**g["greedy"])
        if markdown:
            lines.append(
                f"| {m['model']} | {g['n']} | {g['mismatched']} | {prf} | {g['exact']['f1']:.4f} | "
                f"{g['right_branching']['f1']:.4f} |"
            )
        else:
            lines.append(
                f"{m['model']}: gold brackets on {g['n']} trees ({g['mismatched']} with other leaves): greedy "
                f"P/R/F1 {prf}; exact F1 {g['exact']['f1']:.4f}; right-branching F1 {g['right_branching']['f1']:.4f}"
            )
    return lines


# ---------------------------------------------------------------------------------------------
# The stage: caption records x models -> scored records


def score_records(
    records: Sequence[dict],
    bundle,
    *,
    label: str,
    text_key: str = "caption",
    layer_threshold: int = 0,
    positions: str = "original",
    max_words: int = 40,
    seed: int = 0,
    batch_size: int = 32,
    with_chart: bool = False,
    gold: dict | None = None,
    summary: ModelSummary | None = None,
) -> Iterator[dict]:
    """Score every record with one model, in input order. Skipped captions come out with null
    scores and a `skipped` reason; `summary` (if given) collects scores, skips and gold brackets."""
    tower = text_tower(bundle.model)
    _check_threshold(tower, layer_threshold, positions)
    check_tokenizer(bundle.tokenizer)
    bundle.model.eval()
    summary = summary if summary is not None else ModelSummary(label)
    if gold is not None:
        summary.gold_pairs = []
    for start in range(0, len(records), batch_size):
        batch = records[start : start + batch_size]
        prepared = [
            prepare(r[text_key], bundle.tokenizer, max_words=max_words, context_length=tower.context_length)
            for r in batch
        ]
        todo = [p for p in prepared if isinstance(p, Prepared)]
        charts = iter(charts_prefix(tower, todo, layer_threshold=layer_threshold, positions=positions) if todo else [])
        for offset, (rec, prep) in enumerate(zip(batch, prepared)):
            index = start + offset
            out = {**rec, "model": label}
            if isinstance(prep, str):
                words = caption_words(rec[text_key])
                summary.skipped[prep] = summary.skipped.get(prep, 0) + 1
                out.update(words=words, n_words=len(words), tree=None, tree_exact=None, tscore=None,
                           tscore_exact=None, skipped=prep)
                if with_chart:
                    out["chart"] = None
                yield out
                continue
            chart = next(charts)
            scored = score_chart(chart, caption_rng(seed, index))
            summary.scores[index] = {"tscore": scored["tscore"], "tscore_exact": scored["tscore_exact"]}
            out.update(
                words=prep.words,
                n_words=len(prep.words),
                tree=tree_string(scored["tree"], prep.words),
                tree_exact=tree_string(scored["tree_exact"], prep.words),
                tscore=scored["tscore"],
                tscore_exact=scored["tscore_exact"],
                skipped=None,
            )
            if with_chart:
                out["chart"] = [[round(float(v), CHART_DECIMALS) for v in chart[a, a:]] for a in range(len(chart))]
            if gold is not None and rec["id"] in gold:
                g = gold[rec["id"]]
                if [str(w).lower() for w in tree_leaves(g)] == [w.lower() for w in prep.words]:
                    summary.gold_pairs.append(
                        (brackets(scored["tree"]), brackets(scored["tree_exact"]), brackets(g), len(prep.words))
                    )
                else:
                    summary.gold_mismatch += 1
            yield out
