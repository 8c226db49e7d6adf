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
