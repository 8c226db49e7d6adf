"""Streaming query events for Python callbacks, each progress as the JSON Spark writes: two py4j calls.

PySpark's ``StreamingQueryListener`` turns every progress event into Python objects field by field before
``onQueryProgress`` sees it: a py4j round trip per field of the progress, of each state operator and of
each source (over a hundred per event with four detectors), and the observed metrics (the runner's
validation counts) through ``SparkContext._jvm.PythonSQLUtils``, a name py4j looks up by trying every
imported package against every jar on the classpath. A JFR profile of a 2,000 tx/s latency run put 7.6%
of the JVM's samples in those jar lookups alone, on the two cores the micro-batches need. This listener
asks Spark for the progress' JSON instead (``StreamingQueryProgress.json``), which is what the runner and
the benchmark keep anyway.

It is still registered with the public ``spark.streams.addListener``; only the bridge PySpark hands to
the JVM (the ``_jlistener`` of ``StreamingQueryListener``) is this module's, implementing the same
interface as PySpark's own bridge.
"""

from __future__ import annotations

import json
from typing import Callable

from pyspark.sql.streaming import StreamingQueryListener

ProgressCallback = Callable[[dict], None]
StartedCallback = Callable[[str, str], None]                # query name, query id
TerminatedCallback = Callable[[str, "str | None"], None]    # query id, error (None: stopped cleanly)
RunTerminatedCallback = Callable[[str], None]               # the run id of the query that ended


class JsonProgressListener(StreamingQueryListener):
    """Calls ``on_progress(progress_json_dict)`` for every micro-batch of every query of the session
    (no ``on_progress``: the progress is not even fetched)."""

    def __init__(self, on_progress: ProgressCallback | None, on_started: StartedCallback | None = None,
                 on_terminated: TerminatedCallback | None = None,
                 on_run_terminated: RunTerminatedCallback | None = None):
        self.on_progress = on_progress
        self.on_started = on_started
        self.on_terminated = on_terminated
        self.on_run_terminated = on_run_terminated

    # PySpark's converted events never reach these: the bridge below calls the callbacks directly.
    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    @property
    def _jlistener(self):
        from pyspark import SparkContext

        if not hasattr(self, "_jlistenerobj"):
            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._jlistenerobj


class _JsonBridge:
    """The Java side's ``PythonStreamingQueryListener``, implemented in Python through py4j."""

    def __init__(self, listener: JsonProgressListener):
        self.listener = listener

    def onQueryStarted(self, jevent) -> None:
        if self.listener.on_started is not None:
            self.listener.on_started(jevent.name(), jevent.id().toString())

    def onQueryProgress(self, jevent) -> None:
        if self.listener.on_progress is not None:
            self.listener.on_progress(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent) -> None:
        pass

    def onQueryTerminated(self, jevent) -> None:
        if self.listener.on_terminated is not None:
            error = jevent.exception()
            self.listener.on_terminated(jevent.id().toString(), error.get() if error.isDefined() else None)
        if self.listener.on_run_terminated is not None:
            self.listener.on_run_terminated(jevent.runId().toString())

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
