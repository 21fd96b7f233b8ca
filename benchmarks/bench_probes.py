"""The logistic probe: adjpos's batched torch fit against scikit-learn's, on the same folds.

For each feature set of one layer of a shipped model (held-out task sequences of one length),
both fit every fold of every repeat: scikit-learn one `LogisticRegression` (lbfgs, C = 100,
standardised inputs) per fold, as the probe did before; adjpos all of them as one batched
problem. Prints, per set, the two times, their ratio and the accuracy of each (mean over the
folds), then the total ratio and the largest accuracy difference (targets: ratio >= 20,
difference <= 0.01). scikit-learn's lbfgs stops early on some of these problems (it reports
convergence while its objective is still above the optimum), so a third column gives the
accuracy of scikit-learn solved to a tight tolerance (newton-cholesky, tol 1e-8) where
`--exact` asks for it. ``--json PATH`` also writes every number to PATH, atomically.

    python benchmarks/bench_probes.py [--quick] [--task indexing] [--layer 1] [--exact]
        [--json PATH]
"""

import argparse
import platform
import time
import warnings

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import adjpos
from adjpos.probes import DEFAULT_FEATURES, position_features, sequences_of_length
from adjpos.probes.logistic import LOGISTIC_C, fit_predict_logistic
from adjpos.runs import versions, write_json


def samples(task_name: str, layer: int, n_sequences: int, name: str):
    model, task = adjpos.load_pretrained(task_name)
    tokens = sequences_of_length(task, n_sequences, generator=torch.Generator().manual_seed(0))
    acts = adjpos.capture_residuals(model, tokens, layers=[layer])[0]
    feats = position_features(acts, name, tokens=tokens, d_vocab=model.cfg.d_vocab)
    real = feats.isfinite().all(dim=-1)
    y = torch.arange(tokens.shape[1]).expand_as(real)[real]
    groups = torch.arange(tokens.shape[0])[:, None].expand_as(real)[real]
    return feats[real].double(), y, groups


def sklearn_fits(x, y, folds, *, exact: bool) -> tuple[float, list[np.ndarray]]:
    solver = dict(solver="newton-cholesky", tol=1e-8) if exact else {}
    start, out = time.perf_counter(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for train, test in folds:
            probe = LogisticRegression(C=LOGISTIC_C, max_iter=2000, **solver)
            fitted = make_pipeline(StandardScaler(), probe).fit(x[train].numpy(), y[train].numpy())
            out.append(fitted.predict(x[test].numpy()))
    return time.perf_counter() - start, out


def adjpos_fits(x, y, folds) -> tuple[float, list[np.ndarray]]:
    start = time.perf_counter()
    predicted = fit_predict_logistic(
        [x[tr] for tr, _ in folds],
        [y[tr] for tr, _ in folds],
        [x[te] for _, te in folds],
        n_classes=int(y.max()) + 1,
    )
    return time.perf_counter() - start, [p.numpy() for p in predicted]


def accuracy(predicted, y, folds) -> float:
    return float(
        np.mean([np.mean(p == y[te].numpy()) for p, (_, te) in zip(predicted, folds, strict=True)])
    )


def compare(
    name: str, *, task: str, layer: int, n_sequences: int, cv: int, repeats: int, exact: bool
) -> dict:
    """Both fits of one feature set on the same folds: times, their ratio, accuracies."""
    x, y, groups = samples(task, layer, n_sequences, name)
    folds = [
        (torch.as_tensor(tr), torch.as_tensor(te))
        for seed in range(repeats)
        for tr, te in GroupKFold(cv, shuffle=True, random_state=seed).split(x, y, groups)
    ]
    t_sk, p_sk = sklearn_fits(x, y, folds, exact=False)
    t_ours, p_ours = adjpos_fits(x, y, folds)
    row = {"features": name, "sklearn_s": t_sk, "adjpos_s": t_ours, "ratio": t_sk / t_ours}
    row |= {
        "accuracy_sklearn": accuracy(p_sk, y, folds),
        "accuracy_adjpos": accuracy(p_ours, y, folds),
    }
    if exact:
        row["accuracy_exact"] = accuracy(sklearn_fits(x, y, folds, exact=True)[1], y, folds)
    return row


def print_row(row: dict) -> None:
    line = f"{row['features']:<24}{row['sklearn_s']:>10.2f}{row['adjpos_s']:>10.2f}"
    line += f"{row['ratio']:>8.1f}{row['accuracy_sklearn']:>8.3f}{row['accuracy_adjpos']:>9.3f}"
    if "accuracy_exact" in row:
        line += f"{row['accuracy_exact']:>10.3f}"
    print(line, flush=True)


def summarise(rows: list[dict]) -> dict:
    """Total times and their ratio; the largest accuracy difference of adjpos's fit against
    scikit-learn's (and against the tight optimum, where measured)."""
    total = {key: sum(r[key] for r in rows) for key in ("sklearn_s", "adjpos_s")}
    worst = {
        against: max(abs(r[key] - r["accuracy_adjpos"]) for r in rows)
        for against, key in (("sklearn", "accuracy_sklearn"), ("exact", "accuracy_exact"))
        if key in rows[0]
    }
    total["ratio"] = total["sklearn_s"] / total["adjpos_s"]
    return {"total": total, "largest_accuracy_difference": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two sets, 16 sequences, 2 x 2 folds")
    parser.add_argument("--task", default="indexing")
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--exact", action="store_true", help="also scikit-learn solved tightly")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    torch.set_num_threads(2)
    sets = ("variance", "cosine_profile") if args.quick else DEFAULT_FEATURES
    settings = {"task": args.task, "layer": args.layer, "exact": args.exact}
    n_sequences, cv, repeats = (16, 2, 2) if args.quick else (64, 5, 3)
    settings |= {"n_sequences": n_sequences, "cv": cv, "repeats": repeats}
    print(
        f"{args.task}, layer {args.layer}: {n_sequences} sequences, {cv} folds x {repeats} repeats"
    )
    header = f"{'features':<24}{'sklearn s':>10}{'adjpos s':>10}{'ratio':>8}{'acc sk':>8}"
    print(header + f"{'acc ours':>9}" + (f"{'acc exact':>10}" if args.exact else ""))
    rows = []
    for name in sets:
        rows.append(compare(name, **settings))
        print_row(rows[-1])
    summary = summarise(rows)
    total, worst = summary["total"], summary["largest_accuracy_difference"]
    print(
        f"total: scikit-learn {total['sklearn_s']:.1f} s, adjpos {total['adjpos_s']:.1f} s, "
        f"ratio {total['ratio']:.1f} (target >= 20)"
    )
    print(
        f"largest accuracy difference: {worst['sklearn']:.3f} against scikit-learn's lbfgs "
        "(target <= 0.01)"
    )
    if args.exact:
        print(f"largest accuracy difference: {worst['exact']:.3f} against the tight optimum")
    if args.json:
        machine = {"platform": platform.platform(), "threads": torch.get_num_threads()}
        machine |= {"quick": args.quick, "versions": versions()}
        write_json(args.json, {"machine": machine, "settings": settings, "sets": rows, **summary})


if __name__ == "__main__":
    main()
