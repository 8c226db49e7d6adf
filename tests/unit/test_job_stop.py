"""The detector job's last step (spark_job/job.py ``_stop``): a session the JVM's shutdown hook already stopped
(``make demo`` signals the job's whole process group) is not an error; any other failure to stop is."""

from __future__ import annotations

import logging

import pytest

from spark_job.job import _stop


class _Context:
    def __init__(self, stopped: bool):
        self.stopped = stopped

    def isStopped(self):
        return self.stopped


class _Session:
    """The calls ``_stop`` makes on a PySpark session, with the JVM's answers given."""

    def __init__(self, stop_error: Exception | None, context_stopped: bool):
        self.stop_error, self.stopped_queries, self.session_stopped = stop_error, 0, False
        context = _Context(context_stopped)
        self.sparkContext = type("SC", (), {"_jsc": type("JSC", (), {"sc": lambda _self: context})()})()
        self.streams = type("Streams", (), {"active": [self._query(), self._query()]})()

    def _query(self):
        session = self

        class Query:
            def stop(self):
                if session.stop_error is not None:
                    logging.exception("Exception while sending command.")    # what py4j logs, on the root logger
                    raise session.stop_error
                session.stopped_queries += 1
        return Query()

    def stop(self):
        self.session_stopped = True


def test_queries_then_the_session_are_stopped():
    spark = _Session(None, context_stopped=False)
    _stop(spark)
    assert (spark.stopped_queries, spark.session_stopped) == (2, True)


def test_a_context_the_shutdown_hook_stopped_is_not_an_error(caplog):
    caplog.set_level("INFO")
    _stop(_Session(RuntimeError("Cannot call methods on a stopped SparkContext."), context_stopped=True))
    assert "the JVM stopped the Spark session first" in caplog.text
    assert "Exception while sending command" not in caplog.text     # py4j's traceback of the lost JVM
    logging.exception("Exception while sending command.")            # and only while the job stops
    assert "Exception while sending command" in caplog.text


def test_any_other_failure_to_stop_is_raised():
    with pytest.raises(RuntimeError, match="disk full"):
        _stop(_Session(RuntimeError("disk full"), context_stopped=False))
