"""The evaluation report: Markdown + PNG under ``artifacts/models/`` (git-ignored), from a registry version.

It puts the test-week numbers of every model we trained beside the Handbook's published rows. The
Handbook's numbers are on its own simulated data set; ours come from ``producers.simulator``'s
handbook-compatible profile (a re-implementation of its generator), so the rows are comparable in kind,
not identical data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from common.settings import REPO_ROOT
from models import evaluation

DEFAULT_OUT = REPO_ROOT / "artifacts" / "models"

# Le Borgne et al., Fraud-Detection Handbook, its own simulated data: AUC ROC / average precision /
# CP@100, and where they come from (ch. 3.4: one test week; ch. 5.3 and 6.4: mean over 4 prequential test
# weeks, hyper-parameters selected on 4 validation weeks).
HANDBOOK = [
    ("Handbook: logistic regression (ch. 3.4, 1 test week)", 0.871, 0.606, 0.291),
    ("Handbook: random forest (ch. 3.4, 1 test week)", 0.867, 0.658, 0.287),
    ("Handbook: XGBoost (ch. 3.4, 1 test week)", 0.862, 0.639, 0.273),
    ("Handbook: XGBoost after model selection (ch. 5.3, 4 test weeks)", 0.869, 0.687, 0.303),
    ("Handbook: balanced bagging (ch. 6.4, 4 test weeks), its best row", 0.879, 0.680, 0.305),
]
TARGET = {"auc_roc": 0.879, "card_precision@100": 0.305}


def _pm(m: dict, key: str) -> str:
    std = m.get(f"{key}_std")
    return f"{m[key]:.3f}" + (f" ± {std:.3f}" if std is not None else "")


def table_rows(meta: dict) -> list[str]:
    """Markdown rows: ours (test mean ± std over the test weeks, validation means), then the Handbook's."""
    cp = f"card_precision@{int(meta.get('k', 100))}"
    rows = []
    for name, m in meta["metrics"].items():
        t, v = m["test"], m["validation"]
        mark = " **(selected)**" if name == meta["selected"] else ""
        rows.append(f"| ours: {name}{mark} | {_pm(t, 'auc_roc')} | {_pm(t, 'average_precision')} | {_pm(t, cp)} "
                    f"| {v['auc_roc']:.3f} / {v['average_precision']:.3f} / {v[cp]:.3f} | {m['fit_seconds']} |")
    for name, auc, ap, cpk in HANDBOOK:
        rows.append(f"| {name} | {auc:.3f} | {ap:.3f} | {cpk:.3f} | | |")
    return rows


def render(meta: dict, predictions: pd.DataFrame | None, out_dir: Path | str = DEFAULT_OUT) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    k = int(meta.get("k", 100))
    cp = f"card_precision@{k}"
    best = meta["metrics"][meta["selected"]]["test"]
    reached = best["auc_roc"] > TARGET["auc_roc"] and best[cp] > TARGET["card_precision@100"]
    both = [n for n, m in meta["metrics"].items()
            if m["test"]["auc_roc"] > TARGET["auc_roc"] and m["test"][cp] > TARGET["card_precision@100"]]
    png = _plot(meta, predictions, out / "report.png", k) if predictions is not None else None
    data, protocol = meta["data"], meta.get("protocol", {"folds": 1})
    weeks = [s["test"] for s in meta.get("test_splits", [meta["split"]])]
    v_weeks = [s["test"] for s in meta.get("validation_splits", [])]
    lines = [
        f"# Model evaluation: {meta['name']} ({meta['version']})",
        "",
        f"Data: `producers.simulator`, profile **{data['profile']}**, seed {data['seed']}, {data['days']} days "
        f"({meta['rows']['total']:,} transactions, {meta['rows']['frauds_total']:,} frauds), "
        f"{len(meta['features'])} features (`models/features.py`: the Handbook's 15 + 9 on the customer's "
        f"own amounts; terminal windows up to t - 7 days). Protocol (the Handbook's, ch. 5): "
        f"{protocol['folds']} prequential folds of one training week, a 7-day delay and one test week; "
        f"test weeks {weeks[-1][0]} .. {weeks[0][1]} ({best['transactions']:,} test transactions, "
        f"{best['frauds']} frauds, cards known to be defrauded removed)"
        + (f"; validation weeks {v_weeks[-1][0]} .. {v_weeks[0][1]}" if v_weeks else "") + ". "
        f"CP@{k} per day averaged, a card found on one day left out of the next ones (the Handbook's default).",
        "",
        f"| model | test AUC ROC | test AP | test CP@{k} | validation AUC / AP / CP@{k} | fit s |",
        "|---|---|---|---|---|---|",
        *table_rows(meta),
        "",
        f"Ours: mean ± standard deviation over the {len(weeks)} test weeks, each model fitted on its own "
        f"training week. Selected on validation ({meta['selected_by']}): **{meta['selected']}**. "
        f"Target (beat the Handbook's best row: AUC ROC > {TARGET['auc_roc']} and CP@100 > "
        f"{TARGET['card_precision@100']}): " + ("**reached** by the selected model" if reached else
                                                "**not reached** by the selected model")
        + f" (AUC ROC {best['auc_roc']:.3f}, CP@100 {best[cp]:.3f}); reached by: "
        + (", ".join(both) if both else "none") + ".",
        "",
        f"Alert threshold (max F1 on the pooled validation weeks): {meta['threshold']:.4f} (validation precision "
        f"{meta['threshold_on_validation']['precision']:.3f}, recall {meta['threshold_on_validation']['recall']:.3f}); "
        f"on the test weeks: precision {best.get('precision_at_threshold', float('nan')):.3f}, recall "
        f"{best.get('recall_at_threshold', float('nan')):.3f}. The registered model is the one fitted on the "
        f"most recent training week ({meta['split']['train'][0]} .. {meta['split']['train'][1]}).",
        "",
        "Caveats: the Handbook's numbers are on its own simulated data set, ours on our re-implementation of "
        "its generator: equal protocol, comparable data, not the same data; its ch. 5-6 rows take the best "
        "hyper-parameters per metric, ours is one model. About a fifth of the test frauds are on compromised "
        "terminals whose fraud is not known yet (labels arrive 7 days late): no feature can see them, so they "
        "rank like legitimate transactions and cap the AUC ROC near 0.9.",
        "",
    ]
    if png:
        lines += [f"![precision-recall and CP@{k} per day]({png.name})", ""]
    lines += [f"Reproduce: `python -m models train --profile {data['profile']} --seed {data['seed']} "
              f"--days {data['days']} --folds {protocol['folds']}` (then `python -m models report` re-renders "
              f"this page from the registry).", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plot(meta: dict, predictions: pd.DataFrame, path: Path, k: int) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve

    names = list(meta["metrics"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    y = predictions["is_fraud"].to_numpy()
    for name in names:
        precision, recall, _ = precision_recall_curve(y, predictions[name].to_numpy())
        ap = meta["metrics"][name]["test"]["average_precision"]
        left.plot(recall, precision, label=f"{name} (mean AP {ap:.3f})", lw=2 if name == meta["selected"] else 1)
    left.set(xlabel="recall", ylabel="precision", title="Precision-recall, test weeks pooled", xlim=(0, 1),
             ylim=(0, 1.02))
    left.legend(fontsize=8)
    folds = predictions["fold"].to_numpy() if "fold" in predictions else np.zeros(len(predictions), dtype=int)
    for name in names:
        per_day = pd.concat([
            evaluation.card_precision_at_k_per_day(part["day"].to_numpy(), part["card_id"].to_numpy(),
                                                   part[name].to_numpy(), part["is_fraud"].to_numpy(), k)
            for _, part in predictions.groupby(folds, sort=True)]).sort_index()
        days = [np.datetime64(int(d), "D") for d in per_day.index]
        right.plot(days, per_day.to_numpy(), marker="o", ms=3, lw=2 if name == meta["selected"] else 1, label=name)
    right.axhline(0.305, color="black", ls="--", lw=1, label="Handbook best (0.305)")
    right.set(ylabel=f"CP@{k}", title=f"Card precision@{k} per test day", ylim=(0, 0.6))
    right.tick_params(axis="x", labelrotation=45, labelsize=7)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
