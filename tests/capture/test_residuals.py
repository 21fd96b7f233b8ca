import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.capture import SITES, capture_residuals, hook_name, iter_residuals, reduce_residuals
from adjpos.capture import residuals as residuals_module
from adjpos.models import build_model
from factories import tiny_bridge, tiny_config


def _cache(model, tokens):
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return cache


def _no_hooks_left(model):
    return all(not hp._forward_hooks and not hp._backward_hooks for hp in model.hook_dict.values())


def test_layer_numbering_matches_transformer_lens(tiny_model, tokens):
    stack = capture_residuals(tiny_model, tokens)
    cache = _cache(tiny_model, tokens)
    assert stack.shape == (3, 6, 12, 16)
    torch.testing.assert_close(stack[0], tiny_model.W_E[tokens])  # embeddings, no position
    torch.testing.assert_close(stack[1], cache["blocks.0.hook_resid_post"])
    torch.testing.assert_close(stack[2], cache["blocks.1.hook_resid_post"])


@pytest.mark.parametrize("site", ["resid_mid", "attn_out", "mlp_out"])
def test_other_sites_are_per_block(tiny_model, tokens, site):
    stack = capture_residuals(tiny_model, tokens, site=site, layers=[1])
    torch.testing.assert_close(stack[0], _cache(tiny_model, tokens)[f"blocks.1.hook_{site}"])


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("batch_size", [None, 1, 4])
@pytest.mark.parametrize("by_block", [True, False])
def test_streaming_equals_whole_capture(
    tiny_model, tokens, site, batch_size, by_block, monkeypatch
):
    monkeypatch.setattr(residuals_module, "_runs_from_any_block", lambda model: by_block)
    whole = capture_residuals(tiny_model, tokens, site=site, batch_size=batch_size)
    streamed = list(iter_residuals(tiny_model, tokens, site=site, batch_size=batch_size))
    assert [layer for layer, _ in streamed] == list(range(len(whole)))
    for layer, acts in streamed:
        torch.testing.assert_close(acts, whole[layer], rtol=1e-5, atol=1e-6)
    assert _no_hooks_left(tiny_model)


def test_layer_subset_and_order(tiny_model, tokens):
    whole = capture_residuals(tiny_model, tokens)
    picked = capture_residuals(tiny_model, tokens, layers=[2, 0])
    torch.testing.assert_close(picked, whole[[2, 0]])
    assert [x for x, _ in iter_residuals(tiny_model, tokens, layers=[2, 0])] == [0, 2]


def test_streaming_is_lazy(tokens):
    model = build_model(tiny_config(n_layers=4))
    calls = []
    handle = model.blocks[3].register_forward_hook(lambda *args: calls.append(1))
    stream = iter_residuals(model, tokens)
    next(stream)
    next(stream)
    assert calls == []  # the last block has not run yet
    list(stream)
    assert calls == [1]
    handle.remove()


def test_hooks_removed_after_error(tiny_model, tokens, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("block failed")

    monkeypatch.setattr(tiny_model.blocks[1], "forward", broken)
    with pytest.raises(RuntimeError, match="block failed"):
        capture_residuals(tiny_model, tokens)
    assert _no_hooks_left(tiny_model)


def test_one_sequence_and_device(tiny_model, tokens):
    stack = capture_residuals(tiny_model, tokens[0].int())
    assert stack.shape == (3, 1, 12, 16) and stack.device == tiny_model.W_E.device


def test_works_on_transformer_bridge():
    bridge = tiny_bridge()
    tokens = torch.randint(0, 20, (3, 9), generator=torch.Generator().manual_seed(0))
    whole = capture_residuals(bridge, tokens)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(tokens)
    torch.testing.assert_close(whole[2], cache[hook_name("resid_post", 2)])
    for layer, acts in iter_residuals(bridge, tokens, batch_size=2):
        torch.testing.assert_close(acts, whole[layer])


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (torch.zeros(2, 5), TypeError, "integer tensor"),
        ([[1, 2, 3]], TypeError, "torch.Tensor"),
        (torch.zeros(2, 3, 4, dtype=torch.long), ValueError, r"\[batch, pos\]"),
        (torch.zeros(0, 4, dtype=torch.long), ValueError, "non-empty"),
        (torch.full((2, 5), 20), ValueError, r"\[0, 19\].*d_vocab=20"),
        (torch.full((2, 5), -1), ValueError, r"\[0, 19\]"),
        (torch.zeros(2, 25, dtype=torch.long), ValueError, "n_ctx is 24"),
    ],
)
def test_bad_tokens(tiny_model, bad, error, match):
    with pytest.raises(error, match=match):
        capture_residuals(tiny_model, bad)


@pytest.mark.usefixtures("user_errors")
def test_bad_options(tiny_model, tokens):
    with pytest.raises(ValueError, match=r"choose one of \['resid_post'"):
        capture_residuals(tiny_model, tokens, site="resid_pre")
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        capture_residuals(tiny_model, tokens, layers=[3])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        capture_residuals(tiny_model, tokens, site="attn_out", layers=[2])
    with pytest.raises(ValueError, match="batch_size"):
        capture_residuals(tiny_model, tokens, batch_size=0)
    attn_only = build_model(tiny_config(attn_only=True))
    with pytest.raises(ValueError, match=r"sites it has: \['resid_post', 'attn_out'\]"):
        capture_residuals(attn_only, tokens, site="mlp_out")


# reduce_residuals: every layer reduced inside its hook, one forward pass per chunk


def _forward_counter(model):
    """Counts the entries into block 0 (one per forward pass) and into the last block."""
    calls = {"first": 0, "last": 0}

    def counter(key):
        return lambda *args: calls.__setitem__(key, calls[key] + 1)

    handles = [
        model.blocks[0].register_forward_pre_hook(counter("first")),
        model.blocks[-1].register_forward_pre_hook(counter("last")),
    ]
    return calls, handles


def _hf_bridge():
    import adjpos

    return adjpos.load_hf(adjpos.hf_config("smollm3", {"num_hidden_layers": 4}))


@settings(max_examples=12)
@given(
    site=st.sampled_from(SITES),
    batch_size=st.sampled_from([None, 1, 2, 5]),
    picked=st.lists(st.integers(0, 2), min_size=1, max_size=3),
    kind=st.sampled_from(["hooked", "bridge"]),
)
def test_reduced_states_are_the_captured_ones(site, batch_size, picked, kind):
    """Whatever the site, layers and chunks, reduce sees exactly the states the per-layer
    capture gives (the old path: one run per layer on a bridge), with the rows of its chunk."""
    model = _model(kind)
    layers = [x for x in picked if x < (3 if site == "resid_post" else 2)] or [0]
    tokens = torch.randint(0, 20, (5, 9), generator=torch.Generator().manual_seed(len(picked)))
    seen = reduce_residuals(
        model,
        tokens,
        lambda layer, acts, rows: (acts.clone(), rows),
        site=site,
        layers=layers,
        batch_size=batch_size,
    )
    assert list(seen) == sorted(set(layers))
    for layer, parts in seen.items():
        expected = capture_residuals(
            model, tokens, site=site, layers=[layer], batch_size=batch_size
        )[0]
        assert torch.equal(torch.cat([acts for acts, _ in parts]), expected)
        assert [rows for _, rows in parts] == [
            slice(s, min(s + (batch_size or 5), 5)) for s in range(0, 5, batch_size or 5)
        ]
    assert _no_hooks_left(model)


@functools.cache
def _model(kind: str):
    """One model of each kind for the property test's examples, built on first use (not while
    the test files are collected)."""
    return build_model(tiny_config()) if kind == "hooked" else tiny_bridge()


@pytest.mark.parametrize("kind", ["hooked", "bridge", "hf"])
def test_one_forward_pass_per_chunk_stopping_after_the_deepest_layer(kind):
    model = {"hooked": lambda: build_model(tiny_config(n_layers=4)), "hf": _hf_bridge}.get(
        kind, tiny_bridge
    )()
    tokens = torch.randint(3, 20, (6, 8), generator=torch.Generator().manual_seed(0))
    calls, handles = _forward_counter(model)
    reduce_residuals(model, tokens, lambda *args: None, batch_size=4)
    assert calls == {"first": 2, "last": 2}  # one pass per chunk, all blocks
    calls.update(first=0, last=0)
    reduce_residuals(model, tokens, lambda *args: None, layers=[0, 1])
    assert calls == {"first": 1, "last": 0}  # the blocks past layer 1 never ran
    for handle in handles:
        handle.remove()
    assert _no_hooks_left(model)


def test_reduce_errors_leave_no_hook(tiny_model, tokens):
    def broken(layer, acts, rows):
        if layer == 1:
            raise ValueError("reduce failed")

    with pytest.raises(ValueError, match="reduce failed"):
        reduce_residuals(tiny_model, tokens, broken)
    assert _no_hooks_left(tiny_model)
    assert reduce_residuals(tiny_model, tokens, lambda *a: 1, layers=[2]) == {2: [1]}


def test_a_hook_that_never_fires_is_an_error(tokens, monkeypatch):
    model = build_model(tiny_config(attn_only=True))  # keeps an idle blocks.0.hook_mlp_out
    real = residuals_module.hook_name

    def idle(site, layer):
        return "blocks.0.hook_mlp_out" if layer == 2 else real(site, layer)

    monkeypatch.setattr(residuals_module, "hook_name", idle)
    with pytest.raises(RuntimeError, match=r"fired \{2: 0\} times"):
        reduce_residuals(model, tokens, lambda *a: None, layers=[1, 2])
    assert _no_hooks_left(model)
