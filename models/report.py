"""The evaluation report: Markdown + PNG under ``artifacts/models/`` (git-ignored), from a registry version.

It puts the test-week numbers of every model we trained beside the Handbook's published table (same
protocol and features, the Handbook's own simulated data; ours comes from ``producers.simulator``'s
handbook-compatible profile, so the rows are comparable in kind, not identical data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from common.settings import REPO_ROOT
from models import evaluation

DEFAULT_OUT = REPO_ROOT / "artifacts" / "models"

# Le Borgne et al., Fraud-Detection Handbook: test week AUC ROC / average precision / CP@100.
HANDBOOK = [
    ("Handbook: logistic regression", 0.871, 0.606, 0.291),
    ("Handbook: random forest", 0.867, 0.658, 0.287),
    ("Handbook: XGBoost", 0.862, 0.639, 0.273),
    ("Handbook: XGBoost after model selection", 0.869, 0.687, 0.303),
    ("Handbook: balanced bagging", 0.879, 0.680, 0.305),
]
TARGET = {"auc_roc": 0.879, "card_precision@100": 0.305}


def render(meta: dict, predictions: pd.DataFrame | None, out_dir: Path | str = DEFAULT_OUT) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    k = int(meta.get("k", 100))
    cp = f"card_precision@{k}"
    rows = []
    for name, m in meta["metrics"].items():
        t, v = m["test"], m["validation"]
        mark = " **(selected)**" if name == meta["selected"] else ""
        rows.append(f"| ours: {name}{mark} | {t['auc_roc']:.3f} | {t['average_precision']:.3f} | {t[cp]:.3f} "
                    f"| {v['auc_roc']:.3f} / {v['average_precision']:.3f} / {v[cp]:.3f} | {m['fit_seconds']} |")
    for name, auc, ap, cpk in HANDBOOK:
        rows.append(f"| {name} | {auc:.3f} | {ap:.3f} | {cpk:.3f} | | |")
    best = meta["metrics"][meta["selected"]]["test"]
    reached = best["auc_roc"] > TARGET["auc_roc"] and best.get("card_precision@100", 0) > TARGET["card_precision@100"]
    best_any = max(meta["metrics"].items(), key=lambda kv: kv[1]["test"][cp])
    png = _plot(meta, predictions, out / "report.png", k) if predictions is not None else None
    data = meta["data"]
    lines = [
        f"# Model evaluation: {meta['name']} ({meta['version']})",
        "",
        f"Data: `producers.simulator`, profile **{data['profile']}**, seed {data['seed']}, {data['days']} days "
        f"({meta['rows']['total']:,} transactions, {meta['rows']['frauds_total']:,} frauds). "
        f"Split (Handbook protocol): train {meta['split']['train'][0]}..{meta['split']['train'][1]}, "
        f"delay {meta['split']['delay'][0]}..{meta['split']['delay'][1]}, test {meta['split']['test'][0]}.."
        f"{meta['split']['test'][1]} ({best['transactions']:,} test transactions, {best['frauds']} frauds, "
        f"cards known to be defrauded removed). Validation fold: the same split 14 days earlier.",
        "",
        f"| model | test AUC ROC | test AP | test CP@{k} | validation AUC / AP / CP@{k} | fit s |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Selected on validation ({meta['selected_by']}): **{meta['selected']}**. "
        f"Target (beat the Handbook's best row: AUC ROC > {TARGET['auc_roc']}, CP@100 > {TARGET['card_precision@100']}): "
        + ("**reached**." if reached else "**not reached** by the selected model")
        + f" (CP@100 {best.get('card_precision@100', float('nan')):.3f} "
        + ("above" if best.get("card_precision@100", 0) > TARGET["card_precision@100"] else "below")
        + f" {TARGET['card_precision@100']}, AUC ROC {best['auc_roc']:.3f} "
        + ("above" if best["auc_roc"] > TARGET["auc_roc"] else "below") + f" {TARGET['auc_roc']})."
        + f" Best test CP@{k} of any of our models: {best_any[0]} {best_any[1]['test'][cp]:.3f}.",
        "",
        f"Alert threshold (chosen on validation, max F1): {meta['threshold']:.4f} "
        f"(validation precision {meta['threshold_on_validation']['precision']:.3f}, recall "
        f"{meta['threshold_on_validation']['recall']:.3f}); on the test week: precision "
        f"{best.get('precision_at_threshold', float('nan')):.3f}, recall {best.get('recall_at_threshold', float('nan')):.3f}.",
        "",
        "Caveats: the Handbook's numbers are on its own simulated data set; ours come from our re-implementation "
        "of its generator, so equal protocol and features, not equal data. Terminal windows are whole days "
        "(D-7-w .. D-8) where the Handbook uses exact (t-7d-w, t-7d]. One validation fold, not prequential. "
        "Most test frauds come from compromised terminals, whose first 8 days are invisible to the delayed "
        "terminal risk features: that slice caps the AUC (measured on seed 1 with hist_gradient_boosting: AUC ~0.78 on compromised-terminal frauds vs ~0.98 on compromised cards and 1.0 on amounts > 220).",
        "",
    ]
    if png:
        lines += [f"![precision-recall and CP@{k} per day]({png.name})", ""]
    lines += [f"Reproduce: `python -m models train --profile {data['profile']} --seed {data['seed']} "
              f"--days {data['days']}` then `python -m models report`.", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plot(meta: dict, predictions: pd.DataFrame, path: Path, k: int) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve

    names = list(meta["metrics"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    y = predictions["is_fraud"].to_numpy()
    for name in names:
        precision, recall, _ = precision_recall_curve(y, predictions[name].to_numpy())
        ap = meta["metrics"][name]["test"]["average_precision"]
        left.plot(recall, precision, label=f"{name} (AP {ap:.3f})", lw=2 if name == meta["selected"] else 1)
    left.set(xlabel="recall", ylabel="precision", title="Precision-recall, test week", xlim=(0, 1), ylim=(0, 1.02))
    left.legend(fontsize=8)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        per_day = evaluation.card_precision_at_k_per_day(predictions["day"].to_numpy(), predictions["card_id"].to_numpy(),
                                                         predictions[name].to_numpy(), y, k)
        days = [str(np.datetime64(int(d), "D"))[5:] for d in per_day.index]
        right.bar(np.arange(len(per_day)) + i * width, per_day.to_numpy(), width, label=name)
        right.set_xticks(np.arange(len(per_day)) + 0.4 - width / 2, days)
    right.axhline(0.305, color="black", ls="--", lw=1, label="Handbook best (0.305)")
    right.set(ylabel=f"CP@{k}", title=f"Card precision@{k} per test day", ylim=(0, 1))
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
