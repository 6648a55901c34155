"""The text tower on length buckets (model/text_tower.py length_buckets + ContrastiveForward): the split is
the cheapest one, and bucketed features and gradients equal the single cut after the longest text."""

from __future__ import annotations

import itertools

import pytest
import torch

from mosaictool.methods.fsc_clip_loss import hn_logits_local
from mosaictool.model import openclip
from mosaictool.model.text_tower import encode_text, length_buckets, text_lengths
from mosaictool.training.batch import ContrastiveForward
from train_fixtures import write_tiny_model

LONG = ["a blue square left of a yellow circle above a big red square", "a small green circle right of a red square"]
SHORT = ["red", "a circle", "blue square", "a green one", "yellow", "a square", "red circle", "the blue"]


def cost(lengths: torch.Tensor, groups, overhead: int = 16) -> int:
    return sum((len(g) + overhead) * int(lengths[g].max()) for g in groups)


def brute_force(lengths: torch.Tensor, max_buckets: int, overhead: int = 16) -> int:
    """Least cost over every split of the sorted distinct lengths into at most max_buckets runs."""
    values = sorted(set(lengths.tolist()))
    best = None
    for n_cuts in range(min(max_buckets, len(values))):
        for cuts in itertools.combinations(range(1, len(values)), n_cuts):
            edges = [0, *cuts, len(values)]
            groups = [((lengths >= values[a]) & (lengths <= values[b - 1])).nonzero()[:, 0] for a, b in zip(edges, edges[1:])]
            c = cost(lengths, groups, overhead)
            best = c if best is None else min(best, c)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_length_buckets_is_the_cheapest_partition(seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.cat([torch.randint(20, 27, (int(torch.randint(1, 40, (1,), generator=g)),), generator=g),
                         torch.randint(3, 13, (int(torch.randint(1, 300, (1,), generator=g)),), generator=g)])
    lengths = lengths[torch.randperm(len(lengths), generator=g)]
    for max_buckets in (1, 2, 3):
        groups = length_buckets(lengths, max_buckets)
        assert 1 <= len(groups) <= max_buckets
        assert torch.equal(torch.cat(groups).sort().values, torch.arange(len(lengths)))  # every text exactly once
        assert cost(lengths, groups) <= cost(lengths, [torch.arange(len(lengths))])
        assert cost(lengths, groups) == brute_force(lengths, max_buckets)
        again = length_buckets(lengths.clone(), max_buckets)
        assert len(again) == len(groups) and all(torch.equal(a, b) for a, b in zip(again, groups))


def test_length_buckets_edge_cases():
    assert [g.tolist() for g in length_buckets(torch.full((50,), 9))] == [list(range(50))]
    assert length_buckets(torch.zeros(0, dtype=torch.long)) == []
    # 4 long + 40 short: one bucket costs (44+16)*14 = 840, two (4+16)*14 + (40+16)*4 = 504
    lengths = torch.tensor([14] * 4 + [4] * 40)
    assert [len(g) for g in length_buckets(lengths)] == [40, 4]
    # a few short texts do not pay for a second tower call
    assert len(length_buckets(torch.tensor([14] * 40 + [4] * 3))) == 1
    with pytest.raises(ValueError, match="max_buckets"):
        length_buckets(lengths, 0)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return openclip.create("test-tiny", model_config_file=write_tiny_model(tmp_path_factory.mktemp("m")), seed=0)


def mixed_tokens(bundle) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    texts = LONG * 2 + [SHORT[int(i)] for i in torch.randint(len(SHORT), (40,), generator=g)]
    order = torch.randperm(len(texts), generator=g).tolist()  # long texts scattered through the batch
    return bundle.tokenizer([texts[i] for i in order])


def run(bundle, forward, tokens, dense, images, weights):
    """Forward + backward of a fixed weighted sum; -> outputs, gradients of every parameter."""
    bundle.model.zero_grad()
    out = forward(images, tokens, dense) if dense else forward(images, tokens)
    loss = (out[1] * weights[0]).sum()
    if dense:
        mask = (tokens[:, : out[4].shape[1]] != 0)[..., None]
        loss = loss + (out[4] * mask * weights[1][:, : out[4].shape[1]]).sum() + (out[3] * weights[2]).sum()
    loss.backward()
    return out, {n: p.grad.clone() for n, p in bundle.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("dense", [False, True])
def test_bucketed_forward_equals_single_cut(bundle, dense):
    tokens = mixed_tokens(bundle)
    lengths = (tokens != 0).sum(1)
    assert len(length_buckets(lengths)) > 1 and int(lengths.max()) < tokens.shape[1]
    g = torch.Generator().manual_seed(1)
    images = torch.randn(2, 3, 32, 32, generator=g)
    weights = (torch.randn(len(tokens), 32, generator=g), torch.randn(len(tokens), tokens.shape[1], 32, generator=g),
               torch.randn(2, 16, 32, generator=g))
    calls = []
    hook = bundle.model.transformer.register_forward_hook(lambda mod, args, out: calls.append(out.shape[1]))
    try:
        ours, ours_grad = run(bundle, ContrastiveForward(bundle.model), tokens, dense, images, weights)
        bucket_calls, calls[:] = list(calls), []
        single, single_grad = run(bundle, ContrastiveForward(bundle.model, max_buckets=1), tokens, dense, images, weights)
    finally:
        hook.remove()
    # the test that can fail: mixed lengths run the tower more than once, each time shorter than the longest
    assert len(bucket_calls) > 1 and calls == [int(lengths.max())]
    assert sorted(bucket_calls)[-1] == int(lengths.max()) and sorted(bucket_calls)[0] < int(lengths.max())
    torch.testing.assert_close(ours[1], single[1], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(ours[1], bundle.model.encode_text(tokens, normalize=True), rtol=1e-5, atol=1e-6)
    assert ours_grad.keys() == single_grad.keys() and any(n.startswith("transformer.") for n in ours_grad)
    for name, grad in ours_grad.items():
        scale = single_grad[name].abs().max().item()
        torch.testing.assert_close(grad, single_grad[name], rtol=1e-5, atol=1e-5 * scale + 1e-8, msg=name)
    if dense:
        token_f, reference = ours[4], single[4]
        assert token_f.shape == reference.shape == (len(tokens), int(lengths.max()), 32)
        mask = tokens[:, : token_f.shape[1]] != 0
        torch.testing.assert_close(token_f[mask], reference[mask], rtol=1e-5, atol=1e-6)
        shortest = min(bucket_calls)  # the shortest bucket's texts: zeros past its length
        assert not token_f[lengths <= shortest, shortest:].any()
        # FSC-CLIP's local HN logits read only the masked positions: equal either way
        b = 2
        shaped = [t.reshape(b, -1, *t.shape[1:]) for t in (token_f, reference, mask)]
        torch.testing.assert_close(hn_logits_local(ours[3], shaped[0], shaped[2], ours[2]),
                                   hn_logits_local(single[3], shaped[1], shaped[2], single[2]), rtol=1e-5, atol=1e-5)


def test_equal_lengths_run_the_tower_once(bundle):
    tokens = bundle.tokenizer(["a red circle"] * 30)
    calls = []
    hook = bundle.model.transformer.register_forward_hook(lambda mod, args, out: calls.append(out.shape[1]))
    try:
        with torch.no_grad():
            ContrastiveForward(bundle.model)(torch.randn(1, 3, 32, 32), tokens)
    finally:
        hook.remove()
    assert calls == [int((tokens[0] != 0).sum())]


def test_a_text_with_token_zero_inside_keeps_its_end_token(bundle):
    """"!" before another sign ("!%") is token 0, the tokenizer's padding id: a text's length is up
    to its last non-zero token, not its count of non-zero ones (which cut the end token off)."""
    tokens = bundle.tokenizer(["50!% a red circle", "a square"])
    assert (tokens[0] == 0).any() and (tokens[0] != 0).sum() < text_lengths(tokens)[0]
    assert text_lengths(tokens).tolist() == [int(tokens[0].argmax()) + 1, int(tokens[1].argmax()) + 1]
    with torch.no_grad():
        full = bundle.model.encode_text(tokens, normalize=True)
        torch.testing.assert_close(encode_text(bundle.model, tokens), full, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ContrastiveForward(bundle.model)(torch.randn(1, 3, 32, 32), tokens)[1],
                                   full, rtol=1e-5, atol=1e-6)


def test_encode_text_runs_the_tower_on_the_longest_text_only(bundle):
    tokens = mixed_tokens(bundle)
    calls = []
    hook = bundle.model.transformer.register_forward_hook(lambda mod, args, out: calls.append(out.shape[1]))
    try:
        with torch.no_grad():
            ours = encode_text(bundle.model, tokens)
    finally:
        hook.remove()
    assert calls == [int(text_lengths(tokens).max())] and calls[0] < tokens.shape[1]
    with torch.no_grad():
        torch.testing.assert_close(ours, bundle.model.encode_text(tokens, normalize=True), rtol=1e-5, atol=1e-6)
