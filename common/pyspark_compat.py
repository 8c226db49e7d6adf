"""A targeted work-around for a PySpark 4.0.0 bug in ``applyInPandasWithState``'s Python worker.

The worker receives, next to the data, a struct column describing each group's state and where its rows
start (``startOffset``, ``numRows``). The JVM pads that column with null rows when a batch holds more data
rows than groups (almost always). PySpark 4.0.0 converts it to pandas with the generic Arrow-to-pandas path,
which turns integer children containing nulls into float64, and then calls ``RecordBatch.slice(0.0, 3.0)``:
``TypeError: 'float' object cannot be interpreted as an integer`` (reproduced here with pandas 2.3.3 and
pyarrow 26.0.1; the first figures of docs/architecture.md, "Spark costs that shaped the design", were
taken on 4.3, where it works).

``install()`` replaces only that conversion, only for the state-information column (the struct with a
``startOffset`` field), with ``to_pylist()``, which keeps integers integers and null rows ``None``: exactly
what the worker's loop expects. It is idempotent and does nothing on other PySpark versions. Detector
modules that use ``applyInPandasWithState`` call it at import, so it runs both on the driver and in every
Python worker that unpickles their functions.
"""

from __future__ import annotations

import pyspark

_AFFECTED = ("4.0.0",)


def install() -> bool:
    if pyspark.__version__ not in _AFFECTED:
        return False
    from pyspark.sql.pandas import serializers

    cls = serializers.ApplyInPandasWithStateSerializer
    if getattr(cls, "_fraud_state_info_patch", False):
        return True
    original = cls.arrow_to_pandas

    def arrow_to_pandas(self, arrow_column, *args, **kwargs):
        import pandas as pd
        import pyarrow as pa

        kind = arrow_column.type
        if pa.types.is_struct(kind) and kind.get_field_index("startOffset") >= 0:
            return pd.Series(arrow_column.to_pylist(), dtype=object)
        return original(self, arrow_column, *args, **kwargs)

    cls.arrow_to_pandas = arrow_to_pandas
    cls._fraud_state_info_patch = True
    return True
