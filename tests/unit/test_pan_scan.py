"""The card-number scanner finds a planted Luhn-valid number and ignores look-alikes."""

from __future__ import annotations

import json
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
    in_hash = ("ab" + valid16 + "cd" * 7).encode()      # digits inside a 32-character hex id: part of a hash
    fraction = ('{"score":0.' + valid16 + "}").encode()  # the fraction of a decimal number
    millis = luhn_valid_run(13, "17")                   # an epoch-millisecond timestamp (2023-2026)
    assert is_timestamp(millis)
    for data in (not_luhn, too_short, too_long, millis):
        assert scan_bytes(data.encode()) == [], data
    assert scan_bytes(in_hash) == [] and scan_bytes(fraction) == []
    assert scan_bytes(b"ts=" + millis.encode() + b" card=" + valid16.encode())[0].digits == valid16
    assert [f.digits for f in scan_bytes(b"at the end of a sentence: " + valid16.encode() + b".")] == [valid16]


def test_spaced_dashed_and_base64_card_numbers_are_found():
    import base64

    pan = pan_like()
    spaced = " ".join(pan[i:i + 4] for i in range(0, 16, 4))
    amex_like = luhn_valid_run(15, "37")
    amex_spaced = f"{amex_like[:4]} {amex_like[4:10]} {amex_like[10:]}"
    for text, digits in ((spaced, pan), (spaced.replace(" ", "-"), pan), (amex_spaced, amex_like),
                         (f"on 2026-11-22: {spaced}.", pan)):
        assert [f.digits for f in scan_bytes(text.encode())] == [digits], text
    letter = {"reason": "card_id holds a card number (PAN)",
              "key_base64": base64.b64encode(pan.encode()).decode(),
              "value_base64": base64.b64encode(f'{{"card_id":"{spaced}"}}'.encode()).decode()}
    findings = scan_bytes(json.dumps(letter).encode(), "dlq/0@1")
    assert [f.digits for f in findings] == [pan, pan] and all("base64" in str(f) for f in findings)
    assert pan not in "".join(map(str, findings))


def test_dates_dashed_ids_and_hashes_in_base64_are_not_card_numbers():
    import base64
    import hashlib

    digest = hashlib.sha256(b"x").hexdigest()
    text = (f"txn-1234-00001-000042 2026-11-22 10:15:30 {digest} "
            f"{base64.b64encode(hashlib.sha256(b'y').digest()).decode()} 1234 5678 9012 3456 7890")
    assert scan_bytes(text.encode()) == []
