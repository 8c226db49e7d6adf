"""When the detector job restarts a failed query (spark_job.supervision.RestartPolicy): pure logic, own clock."""

from spark_job.supervision import RestartPolicy


def test_the_back_off_doubles_with_each_failure_in_a_row_up_to_its_cap():
    policy = RestartPolicy(max_failures=10, window_s=1000, first_backoff_s=1, max_backoff_s=8)
    delays = [policy.next_attempt("q", now) - now for now in (0, 10, 20, 30, 40, 50)]
    assert delays == [1, 2, 4, 8, 8, 8]


def test_a_query_that_keeps_failing_is_given_up_and_others_are_not_affected():
    policy = RestartPolicy(max_failures=3, window_s=100)
    assert [policy.next_attempt("flaky", t) is not None for t in (0, 1, 2, 3)] == [True, True, True, False]
    assert policy.next_attempt("other", 4) == 5


def test_failures_older_than_the_window_are_forgotten():
    policy = RestartPolicy(max_failures=2, window_s=60, first_backoff_s=1)
    policy.next_attempt("q", 0)
    policy.next_attempt("q", 10)
    # 100 s later the two earlier failures are out of the window: a fresh start, the first back-off again.
    assert policy.next_attempt("q", 110) == 111


def test_failures_while_no_broker_answers_are_not_counted():
    policy = RestartPolicy(max_failures=1, first_backoff_s=1, outage_retry_s=5)
    assert [policy.next_attempt("q", t, broker_away=True) for t in range(0, 100, 10)] == list(range(5, 105, 10))
    assert policy.next_attempt("q", 100) == 101        # the first counted failure: the first back-off
    assert policy.next_attempt("q", 102) is None


class _Query:
    def __init__(self, name: str, active: bool = True):
        self.name, self.isActive = name, active

    def exception(self):
        return None


class _Streams:
    def awaitAnyTermination(self, timeout):    # noqa: N802 - Spark's name
        return False

    def resetTerminated(self):                 # noqa: N802
        pass


class _Spark:
    streams = _Streams()


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.5                        # every look at the clock: half a second later
        return self.now


def test_a_query_whose_start_failed_is_restarted_under_the_policy_and_the_others_run_on():
    """At the job's start or after new parameters (a ``FailedStart`` from ``start_all`` or ``tick``) a
    query that could not start is restarted like one that failed, never left stopped."""
    from spark_job.supervision import FailedStart, supervise

    restarts, ticks = [], [[FailedStart("rules", "start with new parameters failed: broker away")]]

    def restart(name, error):
        restarts.append((name, error.split(":")[0]))
        return [_Query(name)]

    def tick():
        return ticks.pop() if ticks else []

    failed = supervise(_Spark(), [FailedStart("ml", "start failed: broker away"), _Query("rules")], restart,
                       until=lambda: len(restarts) >= 2, policy=RestartPolicy(first_backoff_s=1), poll_seconds=0,
                       clock=_Clock(), tick=tick)
    assert failed == 0
    assert sorted(restarts) == [("ml", "start failed"), ("rules", "start with new parameters failed")]


def test_a_query_that_cannot_start_at_all_is_given_up_and_counted():
    from spark_job.supervision import FailedStart, supervise

    def restart(name, error):
        raise RuntimeError("the checkpoint does not fit")

    failed = supervise(_Spark(), [FailedStart("ml", "start failed: the checkpoint does not fit")], restart,
                       policy=RestartPolicy(max_failures=2, first_backoff_s=1), poll_seconds=0, clock=_Clock())
    assert failed == 1


def test_a_query_is_never_given_up_while_no_broker_answers_and_restarts_when_one_does():
    """A takeover, or a restart after new parameters, during a broker outage longer than the policy allows
    failures: the query waits for the broker instead of being given up (and the job with it)."""
    from spark_job.supervision import FailedStart, supervise

    outage, restarted = {"failed restarts": 0}, []

    def away() -> bool:
        return outage["failed restarts"] < 20

    def restart(name, error):
        if away():
            outage["failed restarts"] += 1
            raise RuntimeError("KafkaTimeoutError: Failed to update metadata")
        restarted.append(name)
        return [_Query(name)]

    failed = supervise(_Spark(), [FailedStart("rules", "start failed: KafkaTimeoutError")], restart,
                       until=lambda: bool(restarted), policy=RestartPolicy(max_failures=2, first_backoff_s=1),
                       poll_seconds=0, clock=_Clock(), broker_away=away)
    assert (failed, restarted, outage["failed restarts"]) == (0, ["rules"], 20)
