"""What-if: a detector's proposed parameters and its current ones side by side on labelled data.

Both run on the same static DataFrame (one read of the input) and are scored as ``detectors backtest``
scores (``detectors.backtest.score``: an alert is a true positive when its trigger is fraud; recall per
scenario). The comparison lists, per scenario, alerts, precision and recall for both, and the alerts that
appear (only with the proposed parameters) or disappear (only with the current ones). Alert ids are
deterministic from the detector and the transactions an alert names, so an alert "kept" is the very same
finding; a burst that now names one charge more is one alert gone and one new.

The input is a JSONL pair (transactions and labels, as ``detectors backtest`` takes), or the last N hours
of the transactions topic with the simulator's labels topic (``from_topics``). ``save``/``matching``
keep the last what-if per detector under ``$FRAUD_RUN_DIR/params/`` for ``params set --checked``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from common.settings import Settings
from detectors import backtest
from detectors.base import Detector

SHOWN_ALERTS = 10          # alerts listed per direction; the counts are always complete


def compare(current: Detector, proposed: Detector, alerts_now: list[dict], alerts_new: list[dict],
            labels: dict[str, dict]) -> dict:
    """The comparison of two runs of one detector on the same input. Pure Python."""
    now = backtest.score([current], alerts_now, labels)["detectors"][current.name]
    new = backtest.score([proposed], alerts_new, labels)["detectors"][proposed.name]
    scenarios = {}
    for scenario in sorted(set(now["per_scenario"]) | set(new["per_scenario"])):
        scenarios[scenario] = {side: _scenario(report["per_scenario"].get(scenario), scenario)
                               for side, report in (("current", now), ("proposed", new))}
    ids_now = {a["alert_id"]: a for a in alerts_now}
    ids_new = {a["alert_id"]: a for a in alerts_new}
    return {
        "detector": current.name,
        "current_version": current.params_version,
        "changes": {k: [_json(getattr(current.params, k)), _json(getattr(proposed.params, k))]
                    for k in _field_names(current) if getattr(current.params, k) != getattr(proposed.params, k)},
        "proposed_params": {k: _json(getattr(proposed.params, k)) for k in _field_names(proposed)},
        "totals": {side: {"alerts": r["alerts"], "precision": r["precision"], "recall": r["recall"]}
                   for side, r in (("current", now), ("proposed", new))},
        "scenarios": scenarios,
        "appear": [_brief(ids_new[i], labels) for i in sorted(set(ids_new) - set(ids_now), key=lambda i: (ids_new[i]["event_time"], i))],
        "disappear": [_brief(ids_now[i], labels) for i in sorted(set(ids_now) - set(ids_new), key=lambda i: (ids_now[i]["event_time"], i))],
    }


def _field_names(detector: Detector) -> list[str]:
    from detectors.params import settable_fields
    return list(settable_fields(detector))


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _scenario(entry: dict | None, scenario: str) -> dict:
    alerts = (entry or {}).get("alerts", 0)
    true_positives = 0 if scenario == backtest.LEGITIMATE else alerts
    return {"alerts": alerts, "precision": round(true_positives / alerts, 4) if alerts else None,
            "recall": (entry or {}).get("recall")}


def _brief(alert: dict, labels: dict[str, dict]) -> dict:
    label = labels.get(alert["txn_ids"][-1]) or {}
    return {"alert_id": alert["alert_id"], "card_id": alert["card_id"], "event_time": alert["event_time"],
            "scenario": (label.get("scenario") or "unknown") if label.get("is_fraud") else backtest.LEGITIMATE,
            "transactions": len(alert["txn_ids"])}


def render(result: dict) -> str:
    """The comparison as text, for the terminal and the docs."""
    def fmt(value):
        return "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    changes = ", ".join(f"{k} {fmt(a)} -> {fmt(b)}" for k, (a, b) in result["changes"].items()) or "no change"
    lines = [f"what-if {result['detector']}: {changes} (current parameters: version {result['current_version']})",
             "", f"{'scenario':<22} {'alerts now':>10} {'proposed':>9} {'precision now':>14} {'proposed':>9}"
                 f" {'recall now':>11} {'proposed':>9}"]
    rows = [(s, v["current"], v["proposed"]) for s, v in result["scenarios"].items()]
    rows.append(("all", result["totals"]["current"], result["totals"]["proposed"]))
    for name, a, b in rows:
        lines.append(f"{name:<22} {a['alerts']:>10} {b['alerts']:>9} {fmt(a['precision']):>14} "
                     f"{fmt(b['precision']):>9} {fmt(a['recall']):>11} {fmt(b['recall']):>9}")
    lines.append("(recall of \"all\": over the detector's own scenarios)")
    for side in ("appear", "disappear"):
        found = result[side]
        lines += ["", f"{len(found)} alerts {side}" + (":" if found else "")]
        for a in found[:SHOWN_ALERTS]:
            lines.append(f"  {a['event_time']}  {a['card_id']}  {a['scenario']:<16} {a['transactions']} txns  "
                         f"{a['alert_id'][:12]}")
        if len(found) > SHOWN_ALERTS:
            lines.append(f"  ... and {len(found) - SHOWN_ALERTS} more")
    return "\n".join(lines) + "\n"


def run(current: Detector, proposed: Detector, transactions: Path, labels_path: Path, spark=None) -> dict:
    """Run both parameter sets on the JSONL pair and compare them."""
    from detectors.harness import alert_to_dict

    labels = backtest.load_labels(labels_path, backtest.Unreadable(str(labels_path)))
    if spark is None:
        from common.spark import get_spark
        spark = get_spark("detectors-whatif", with_kafka=False)
    frame = backtest.read_transactions(spark, transactions).cache()
    try:
        runs = [[alert_to_dict(r) for r in detector.run(frame).collect()] for detector in (current, proposed)]
    finally:
        frame.unpersist()
    return compare(current, proposed, runs[0], runs[1], labels)


def from_topics(settings: Settings, hours: float, folder: Path) -> tuple[Path, Path]:
    """The last ``hours`` of the transactions topic and of the labels topic (by record timestamp, read
    committed) as a JSONL pair in ``folder``; the backtest's screening leaves out broken records."""
    since_ms = int((time.time() - hours * 3600) * 1000)
    paths = folder / "transactions.jsonl", folder / "labels.jsonl"
    for topic, path in zip((settings.topic_transactions, settings.topic_labels), paths):
        with open(path, "wb") as handle:
            for value in _values_since(settings, topic, since_ms):
                handle.write(value.replace(b"\n", b" ") + b"\n")
    return paths


def _values_since(settings: Settings, topic: str, since_ms: int):
    from common.kafka_io import make_consumer
    from kafka import TopicPartition

    consumer = make_consumer(settings, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        starts = consumer.offsets_for_times({tp: since_ms for tp in tps})
        ends = consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp].offset if starts.get(tp) else ends[tp])
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for batch in consumer.poll(timeout_ms=500).values():
                for record in batch:
                    if record.value is not None and record.offset < ends[TopicPartition(topic, record.partition)]:
                        yield record.value
    finally:
        consumer.close()


# --- the last what-if per detector, for `params set --checked` -----------------------------------

def fingerprint(detector: str, base_version: int, params: dict) -> str:
    material = json.dumps({"detector": detector, "base": base_version, "params": params}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def _path(settings: Settings, detector: str) -> Path:
    return Path(settings.run_dir) / "params" / f"whatif-{detector}.json"


def save(settings: Settings, result: dict, source: str) -> Path:
    path = _path(settings, result["detector"])
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {"fingerprint": fingerprint(result["detector"], result["current_version"], result["proposed_params"]),
               "source": source, "totals": result["totals"], "appear": len(result["appear"]),
               "disappear": len(result["disappear"]), "ran_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path.write_text(json.dumps(summary, sort_keys=True) + "\n")
    return path


def matching(settings: Settings, detector: str, base_version: int, params: dict) -> dict | None:
    """The saved what-if of exactly these proposed parameters against ``base_version``, or None."""
    path = _path(settings, detector)
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved if saved.get("fingerprint") == fingerprint(detector, base_version, params) else None
