"""Errors a user can read: every entry point ends an expected failure with ONE line on stderr and a
non-zero exit status, never a traceback (common/cli_errors.py).

Each case runs the real command in a subprocess (``python -m ...`` from the repository root). None of
them may start Spark or wait on a network time-out: Kafka and Redis are pointed at a port nothing
listens on, the model registry at an empty folder.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builders import encode, txn

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
SECONDS = 30          # generous for a loaded machine; each command takes about a second


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound by us, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def port() -> int:
    return closed_port()


@pytest.fixture(scope="module")
def env(port, tmp_path_factory) -> dict[str, str]:
    """Kafka and Redis on a closed port, an empty model registry, run state in a temporary folder."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FRAUD_")}
    return dict(base, FRAUD_KAFKA_BOOTSTRAP=f"127.0.0.1:{port}", FRAUD_REDIS_URL=f"redis://127.0.0.1:{port}/0",
                FRAUD_MODEL_REGISTRY=str(tmp_path_factory.mktemp("empty-registry")),
                FRAUD_RUN_DIR=str(tmp_path_factory.mktemp("run")), CI="true")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny transactions file and its labels (only for commands that must fail before reading them)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "transactions.jsonl").write_bytes(b"".join(encode(txn(i)) + b"\n" for i in range(3)))
    (folder / "labels.jsonl").write_text("".join(json.dumps({"txn_id": txn(i)["txn_id"], "is_fraud": False,
                                                             "scenario": "none"}) + "\n" for i in range(3)))
    return folder / "transactions.jsonl", folder / "labels.jsonl"


def run(env: dict[str, str], *args: str, **overrides: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, env=dict(env, **overrides),
                            capture_output=True, text=True, timeout=SECONDS)
    result.elapsed = time.monotonic() - started
    return result


def one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """Assert the command failed with exactly one non-empty line on stderr holding ``words``; return it."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- a missing or unreadable file: refused before Spark starts -----------------------------------

def test_backtest_of_a_missing_file_fails_in_one_line_before_spark_starts(env):
    result = run(env, "detectors", "backtest", "--transactions", "/nonexistent", "--labels", "x", "--out", "y")
    line = one_line_error(result, "--transactions", "/nonexistent", "No such file")
    assert result.returncode == 2 and "Spark" not in result.stderr, line
    assert result.elapsed < 15


def test_backtest_of_a_missing_labels_file_fails_in_one_line(env, inputs, tmp_path):
    transactions, _ = inputs
    result = run(env, "detectors", "backtest", "--transactions", str(transactions),
                 "--labels", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out"))
    one_line_error(result, "--labels", "missing.jsonl", "No such file")


def test_backtest_of_a_folder_or_an_unreadable_file_fails_in_one_line(env, inputs, tmp_path):
    transactions, labels = inputs
    result = run(env, "detectors", "backtest", "--transactions", str(tmp_path), "--labels", str(labels),
                 "--out", str(tmp_path / "out"))
    one_line_error(result, "--transactions", "is a folder")
    (tmp_path / "a-file").write_text("")
    result = run(env, "detectors", "backtest", "--transactions", str(transactions), "--labels", str(labels),
                 "--out", str(tmp_path / "a-file"))
    one_line_error(result, "--out", "a-file")


def test_replay_of_a_missing_file_fails_in_one_line(env):
    one_line_error(run(env, "producers", "replay", "/nonexistent.jsonl"), "/nonexistent.jsonl", "No such file")


# --- an unknown detector name -------------------------------------------------------------------

@pytest.mark.parametrize("command", [["run"], ["list"], ["backtest"]])
def test_an_unknown_detector_name_fails_in_one_line(env, inputs, tmp_path, command):
    transactions, labels = inputs
    files = ["--transactions", str(transactions), "--labels", str(labels), "--out", str(tmp_path)] \
        if command == ["backtest"] else []
    result = run(env, "detectors", *command, "nosuch", *files)
    one_line_error(result, "no detector named 'nosuch'", "registered:", "velocity")
    assert result.returncode == 2


def test_the_spark_job_entry_point_names_an_unknown_detector_in_one_line(env):
    one_line_error(run(env, "spark_job", "nosuch"), "no detector named 'nosuch'")


# --- Kafka or Redis unreachable -----------------------------------------------------------------

def test_simulate_to_kafka_with_no_broker_fails_in_one_line(env, port):
    result = run(env, "producers", "simulate", "--count", "10", "--no-progress")
    one_line_error(result, f"127.0.0.1:{port}", "Kafka", "`make up` starts the local stack")
    assert result.returncode == 1 and result.elapsed < 15


def test_replay_with_no_broker_fails_in_one_line(env, port, inputs):
    transactions, _ = inputs
    one_line_error(run(env, "producers", "replay", str(transactions), "--no-progress"),
                   f"127.0.0.1:{port}", "Kafka", "`make up`")


def test_load_reference_with_no_redis_fails_in_one_line(env, port):
    result = run(env, "producers", "load-reference", "--customers", "10")
    one_line_error(result, f"redis://127.0.0.1:{port}/0", "Redis", "`make up` starts the local stack")
    assert result.returncode == 1 and result.elapsed < 15


def test_a_setting_that_cannot_be_read_fails_in_one_line(env):
    result = run(env, "producers", "load-reference", FRAUD_PARTITIONS_ALERTS="six")
    one_line_error(result, "partitions_alerts", "'six'")


# --- no trained model ---------------------------------------------------------------------------

def test_backtest_of_ml_score_without_a_model_fails_in_one_line_before_spark_starts(env, inputs, tmp_path):
    transactions, labels = inputs
    result = run(env, "detectors", "backtest", "ml_score", "--transactions", str(transactions),
                 "--labels", str(labels), "--out", str(tmp_path / "out"))
    one_line_error(result, "ml_score", "run `make train`")
    assert "Spark" not in result.stderr


def test_run_of_ml_score_without_a_model_fails_in_one_line(env):
    one_line_error(run(env, "detectors", "run", "ml_score"), "ml_score", "run `make train`")


def test_models_report_without_a_model_says_to_run_make_train(env):
    result = run(env, "models", "report")
    one_line_error(result, "no model in the registry", "run `make train`")


def test_backtest_of_every_detector_leaves_ml_score_out_in_one_line_before_spark(monkeypatch, tmp_path, capsys):
    """In process, with the backtest itself replaced: the note comes before anything runs, and the rule
    detectors go on (tests/integration/test_backtest_cli.py runs it with Spark)."""
    from common.settings import get_settings
    from detectors import __main__ as cli, backtest, registry

    runs = []
    monkeypatch.setenv("FRAUD_MODEL_REGISTRY", str(tmp_path / "empty"))
    monkeypatch.setattr(backtest, "run", lambda detectors, *args, **kw: runs.append(
        ([d.name for d in detectors], capsys.readouterr().err)) or {"fake": True})
    monkeypatch.setattr(backtest, "markdown", lambda report: "report\n")
    (tmp_path / "t.jsonl").write_text("")
    get_settings.cache_clear()
    try:
        assert cli.main(["backtest", "--transactions", str(tmp_path / "t.jsonl"), "--labels",
                         str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "out")]) == 0
    finally:
        get_settings.cache_clear()
    [(names, stderr_before)] = runs
    assert names == [n for n in registry.names() if n != "ml_score"]
    [line] = stderr_before.splitlines()
    assert line.startswith("python -m detectors backtest: ml_score left out: no model to score with")
    assert "run `make train`" in line


# --- option values that make no sense -----------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["models", "train", "--folds", "0"], ["--folds", "positive", "not 0"]),
    (["models", "train", "--models", "nosuch"], ["unknown model 'nosuch'"]),
    (["models", "train", "--days", "10"], ["--days 10", "too few"]),
    (["producers", "simulate", "--count", "5", "--rate", "0"], ["--rate", "positive", "not 0"]),
    (["producers", "simulate", "--count", "5", "--rate", "-5"], ["--rate", "positive", "not -5"]),
    (["producers", "simulate", "--count", "5", "--customers", "0"], ["--customers", "positive"]),
    (["producers", "simulate", "--count", "0"], ["--count", "positive"]),
    (["producers", "simulate", "--duration", "-1"], ["--duration", "positive"]),
    (["producers", "simulate", "--count", "5", "--late-fraction", "2"], ["--late-fraction", "between 0 and 1"]),
    (["producers", "simulate"], ["--count", "--duration"]),
    (["producers", "load-reference", "--customers", "0"], ["--customers", "positive"]),
    (["producers", "replay", "pyproject.toml", "--rate", "0"], ["--rate", "positive"]),
    (["producers", "replay", "pyproject.toml", "--speedup", "-1"], ["--speedup", "positive"]),
    (["demo", "--rate", "0"], ["--rate", "positive"]),
    (["demo", "--duration", "0"], ["--duration", "positive"]),
    (["detectors", "run", "--max-offsets-per-trigger", "0"], ["--max-offsets-per-trigger", "positive"]),
    (["detectors", "run", "--duration", "-1"], ["--duration", ">= 0"]),
    (["detectors", "backtest"], ["required", "--transactions"]),
    (["deploy.create_topics", "--timeout", "0"], ["--timeout", "positive"]),
    (["detectors", "nosuch-command"], ["invalid choice"]),
])
def test_option_values_that_make_no_sense_are_refused_in_one_line(env, args, words):
    result = run(env, *args)
    one_line_error(result, *words)
    assert result.returncode == 2


# --- help ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("service", ["sinks.cases", "sinks.enricher"])
def test_faust_worker_help_connects_to_nothing(env, service):
    """``worker --help`` with a broker address that records every connection: none is made."""
    with socket.socket() as broker:
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        broker.setblocking(False)
        result = run(env, service, "worker", "--help",
                     FRAUD_KAFKA_BOOTSTRAP=f"127.0.0.1:{broker.getsockname()[1]}")
        with pytest.raises(BlockingIOError):
            broker.accept()                      # nobody knocked
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "Usage:" in result.stdout and "--help" in result.stdout
    assert result.elapsed < 15


def test_detectors_run_help_shows_every_runner_option(env):
    from spark_job import options

    runner = argparse.ArgumentParser()
    options.add_arguments(runner)
    flags = [flag for action in runner._actions for flag in action.option_strings if flag not in ("-h", "--help")]
    result = run(env, "detectors", "run", "--help")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    missing = [flag for flag in flags if flag not in result.stdout]
    assert flags and not missing, missing


# --- backtest inputs: unreadable lines are counted, not dropped silently (pure Python) ------------

def test_unreadable_transaction_lines_are_counted_with_the_first_ones_number_and_reason(tmp_path):
    from detectors import backtest

    path = tmp_path / "transactions.jsonl"
    good = [encode(txn(i)) for i in range(3)]
    path.write_bytes(good[0] + b"\nnot json\n\n" + good[1] + b"\n" + encode(txn(9, amount=-1)) + b"\n"
                     + good[2] + b"\n")
    unreadable, readable = backtest.screen_transactions(path, tmp_path / "readable.jsonl")
    assert (unreadable.count, unreadable.first_line) == (2, 2)
    assert unreadable.first_reason == "value is not valid JSON"
    assert unreadable.summary() == f"2 lines of {path} could not be read (first: line 2: value is not valid JSON)"
    assert readable == tmp_path / "readable.jsonl"
    assert readable.read_bytes().split() == good            # exactly the readable lines, for Spark

    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"\n".join(good) + b"\n\n")
    unreadable, readable = backtest.screen_transactions(clean, tmp_path / "unused.jsonl")
    assert unreadable.count == 0 and readable == clean and not (tmp_path / "unused.jsonl").exists()


def test_unreadable_label_lines_are_counted_or_refused(tmp_path):
    from common.contracts import ContractError
    from detectors import backtest

    path = tmp_path / "labels.jsonl"
    path.write_text('{"txn_id": "a", "is_fraud": true, "scenario": "double_swipe"}\n'
                    '{"txn_id": "b", "is_fraud": "yes"}\n[1]\n{"txn_id": "c", "is_fraud": false, "scenario": null}\n')
    unreadable = backtest.Unreadable(str(path))
    assert set(backtest.load_labels(path, unreadable)) == {"a", "c"}
    assert (unreadable.count, unreadable.first_line, unreadable.first_reason) == (2, 2, "no is_fraud (true or false)")
    assert unreadable.summary().startswith(f"2 lines of {path} could not be read (first: line 2: ")
    with pytest.raises(ContractError, match="line 2: no is_fraud"):
        backtest.load_labels(path)


def test_the_report_says_which_lines_could_not_be_read():
    from detectors import backtest

    report = {"labelled_transactions": 0, "fraud_transactions": {}, "detectors": {},
              "unreadable_lines": {"transactions": backtest.Unreadable("t.jsonl", 1, 7, "value is not valid JSON")
                                   .as_dict(), "labels": backtest.Unreadable("l.jsonl").as_dict()}}
    text = backtest.markdown(report)
    assert "1 line of t.jsonl could not be read (first: line 7: value is not valid JSON)" in text
    assert "l.jsonl" not in text
    report["unreadable_lines"]["transactions"]["count"] = 0
    assert "Unreadable input lines: none." in backtest.markdown(report)
