"""Checks on a detector's streaming plan, made before a query starts.

The runner gives every stateful operator of a query the query's one global watermark
(``spark.sql.streaming.statefulOperator.allowMultiple=false`` in ``common/spark.py``: see
``detectors.runner.read_once`` for why). A stateful operator fed by another one (an aggregation of a
join's pairs, a window over windows) would then judge its input against a watermark meant for the raw
transactions, and could drop the upstream operator's output as late without a word. Spark does not refuse
such a plan in that mode, so ``Detector.run`` does.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

# Logical operators that keep state when their input is a stream (a Join only between two streams).
STATEFUL_NODES = {"Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
                  "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPandas",
                  "FlatMapCoGroupsInPandasWithState", "Join"}


def _children(node) -> list:
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def _is_stateful(node) -> bool:
    name = node.nodeName()
    if name not in STATEFUL_NODES or not node.isStreaming():
        return False
    return name != "Join" or all(child.isStreaming() for child in _children(node))


def chained_stateful_operators(frame: DataFrame) -> list[tuple[str, str]]:
    """(outer, inner) pairs of stateful operators in ``frame``'s plan where ``inner`` feeds ``outer``."""
    chains: list[tuple[str, str]] = []

    def walk(node) -> list[str]:
        """The stateful operators at or below ``node`` that are not below another stateful one."""
        below = [name for child in _children(node) for name in walk(child)]
        if _is_stateful(node):
            chains.extend((node.nodeName(), inner) for inner in below)
            return [node.nodeName()]
        return below

    walk(frame._jdf.queryExecution().analyzed())
    return chains


def require_unchained(frame: DataFrame, detector_name: str) -> None:
    chains = chained_stateful_operators(frame)
    if chains:
        outer, inner = chains[0]
        raise ValueError(f"detector {detector_name}: a stateful operator ({inner}) feeds another ({outer}); "
                         "every operator of a query gets the query's one watermark, so give each stateful "
                         "step its own detector (docs/adding-a-detector.md)")
