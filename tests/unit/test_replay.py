"""Replay's pure parts: line checking, the refuse-or-raw policy, event-time pacing (no broker)."""

from __future__ import annotations

import json

from producers.replay import EventTimePacer, check_line, extract_card_id, problems, publish_file
from tests.builders import pan_like

GOOD = {"txn_id": "t1", "card_id": "card-000001", "customer_id": "c1", "merchant_id": "m1",
        "terminal_id": "x1", "amount": 12.5, "currency": "EUR", "event_time": "2026-01-05T10:00:00.000Z",
        "channel": "pos", "mcc": "5411", "lat": 45.0, "lon": 5.0}


def line(**changes) -> bytes:
    return json.dumps(dict(GOOD, **changes)).encode()


class FakeProducer:
    def __init__(self):
        self.sent = []

    def send(self, topic, value=None, key=None, partition=None):
        self.sent.append((topic, key, value))
        return self

    def add_errback(self, fn):
        return self

    def flush(self, timeout=None):
        pass

    def close(self, timeout=None):
        pass


def write(tmp_path, lines):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_valid_line_gives_its_card_as_key_and_its_event_time():
    checked = check_line(1, line())
    assert checked.problem is None and checked.key == b"card-000001"
    assert checked.event_ms == 1_767_607_200_000


def test_bad_lines_are_reported_with_their_number_and_reason(tmp_path):
    path = write(tmp_path, [line(), line(amount=-1), b"{not json", line(), line(card_id=pan_like())])
    bad = problems(path)
    assert [(b.number, b.problem) for b in bad] == [
        (2, "amount is negative: -1"), (3, "value is not valid JSON"),
        (5, "card_id holds a card number (PAN); ids must be tokens")]


def test_a_file_with_a_bad_line_is_refused_whole(tmp_path):
    path = write(tmp_path, [line(), line(currency="euro"), line()])
    producer = FakeProducer()
    reported = []
    stats, bad = publish_file(None, path, "t", producer=producer, report=reported.append)
    assert [b.number for b in bad] == [2] == [b.number for b in reported]
    assert producer.sent == [] and stats.attempted == 0


def test_raw_publishes_every_line_as_is_bad_ones_keyed_by_card_if_readable(tmp_path):
    lines = [line(), line(currency="euro"), b"{not json", line(txn_id="t2")]
    producer = FakeProducer()
    stats, bad = publish_file(None, write(tmp_path, lines), "t", raw=True, producer=producer)
    assert [value for _, _, value in producer.sent] == lines
    assert [key for _, key, _ in producer.sent] == [b"card-000001", b"card-000001", None, b"card-000001"]
    assert [b.number for b in bad] == [2, 3] and stats.sent == 4


def test_extract_card_id_only_from_a_json_object_with_a_string_card_id():
    assert extract_card_id(b'{"card_id": "card-9"}') == b"card-9"
    assert extract_card_id(b'{"card_id": 9}') is None
    assert extract_card_id(b"[1, 2]") is None
    assert extract_card_id(b"\xff") is None


def test_event_time_pacing_sleeps_only_when_ahead_and_never_for_late_records():
    now = [100.0]
    sleeps = []

    def advance_clock(seconds):  # the fake clock: nothing waits
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    pacer = EventTimePacer(speedup=10, clock=lambda: now[0], sleep=advance_clock)
    for event_ms in (0, 1_000, 1_001, 500, 20_000):  # 500 is out of order: released at once
        pacer.wait(event_ms)
    assert sleeps == [0.1, 1.9]   # 1 s of event time at 10x = 0.1 s; 1.001 s is within the slack
    assert now[0] == 102.0
    pacer.wait(None)              # raw lines without an event time are not delayed
    assert len(sleeps) == 2
