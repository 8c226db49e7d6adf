"""The card-number scanner finds a planted Luhn-valid number and ignores look-alikes."""

from __future__ import annotations

from collections import namedtuple

from common.contracts import luhn_valid
from common.pan_scan import is_timestamp, scan_bytes, scan_paths, scan_records
from tests.builders import pan_like

Record = namedtuple("Record", "topic partition offset key value")


def luhn_valid_run(length: int, first: str) -> str:
    """A Luhn-valid digit run, built at run time (no such number is written in the repository)."""
    body = first + "3" * (length - len(first) - 1)
    return next(body + str(d) for d in range(10) if luhn_valid(body + str(d)))


def test_finds_a_planted_card_number_in_text_files_and_records(tmp_path):
    pan = pan_like()
    line = f'{{"card_id":"{pan}","amount":12.5}}'.encode()
    assert [f.digits for f in scan_bytes(line)] == [pan]
    assert scan_bytes(line)[0].offset == line.index(pan.encode())

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "service.log").write_bytes(b"all fine\nrejected pan=" + pan.encode() + b" at 10:00\n")
    (tmp_path / "clean.json").write_bytes(b'{"card_id":"card-000042"}')
    findings = scan_paths([tmp_path, tmp_path / "missing"])
    assert [(f.where, f.digits) for f in findings] == [(str(tmp_path / "logs" / "service.log"), pan)]

    records = [Record("alerts", 0, 5, b"card-1", b'{"ok":1}'), Record("cases", 2, 9, None, line)]
    assert [f.where for f in scan_records(records)] == ["cases/2@9"]


def test_every_length_from_13_to_19_is_found_and_the_report_does_not_repeat_the_number():
    for length in range(13, 20):
        run = luhn_valid_run(length, "4")
        findings = scan_bytes(b"x " + run.encode() + b" y", "where")
        assert [f.digits for f in findings] == [run], length
        assert run not in str(findings[0]) and run not in repr(findings[0]) and "where" in str(findings[0])


def test_look_alikes_are_not_card_numbers():
    valid16 = luhn_valid_run(16, "4")
    not_luhn = valid16[:-1] + str((int(valid16[-1]) + 1) % 10)
    too_short, too_long = luhn_valid_run(12, "4"), luhn_valid_run(20, "4")
    in_hash = ("ab" + valid16 + "cd").encode()          # digits inside a hex id: part of another token
    fraction = ('{"score":0.' + valid16 + "}").encode()  # the fraction of a decimal number
    millis = luhn_valid_run(13, "17")                   # an epoch-millisecond timestamp (2023-2026)
    assert is_timestamp(millis)
    for data in (not_luhn, too_short, too_long, millis):
        assert scan_bytes(data.encode()) == [], data
    assert scan_bytes(in_hash) == [] and scan_bytes(fraction) == []
    assert scan_bytes(b"ts=" + millis.encode() + b" card=" + valid16.encode())[0].digits == valid16
    assert [f.digits for f in scan_bytes(b"at the end of a sentence: " + valid16.encode() + b".")] == [valid16]
