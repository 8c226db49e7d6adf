"""Find card numbers (PANs) in bytes, files and Kafka records: the check that none ever leaks out.

A finding is a card number as ``common.card_numbers`` defines it: 13 to 19 ASCII digits, bare or in
the spaced or dashed groups cards are printed in, standing alone (no digit or letter right before or
after it), that pass the Luhn check: what a primary account number looks like. Base64 text (a run of
20 or more base64 characters, as in a dead letter's ``key_base64``/``value_base64``) is decoded and
scanned too, so a number cannot hide in an encoding. Card numbers must never appear anywhere this project writes (docs/architecture.md, "Contracts": cards are
tokens). Two kinds of digits are not a card number, and one in ten of them would pass Luhn by chance:
digits inside a longer token (hex hashes and UUIDs: alert and case ids, SHA-256 sums, Kafka's log
folder names) and the fraction digits of a decimal number (a score with 16 decimals).

One kind of digit run is not reported: a Unix timestamp in milliseconds, microseconds or nanoseconds
between 2020 and 2040 (13, 16 or 19 digits starting 15..22, e.g. Spark's checkpoint and log fields
``batchTimestampMs``). One in ten of them passes Luhn by chance, and no card scheme issues numbers of
those lengths with those leading digits (Visa starts with 4, Mastercard 51-55 and 2221-2720, ...).

    findings = scan_bytes(data)                 # [Finding(where, offset, digits)]
    findings = scan_paths([log_dir, out_dir])   # every file below, read as bytes
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from common.card_numbers import CANDIDATE_PATTERN, digits_of, is_card_digits

CANDIDATE = re.compile(CANDIDATE_PATTERN.encode())
# 20 base64 characters decode to 15 bytes, room for the shortest card number.
BASE64_RUN = re.compile(rb"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{20,}={0,2}")
EPOCH_2020_MS, EPOCH_2040_MS = 1_577_836_800_000, 2_208_988_800_000
TIMESTAMP_SCALES = {13: 1, 16: 1_000, 19: 1_000_000}   # digits -> units per millisecond


@dataclass(frozen=True)
class Finding:
    where: str          # file path, or topic/partition/offset of a record
    offset: int         # byte offset of the digit run
    digits: str = field(repr=False)   # kept out of reprs and test reports: a report must not leak it

    def __str__(self) -> str:
        # Never print the number itself: a report of a leak must not leak it again.
        return f"{self.where} @ byte {self.offset}: a Luhn-valid {len(self.digits)}-digit run " \
               f"({self.digits[:2]}...{self.digits[-2:]})"


def is_timestamp(digits: str) -> bool:
    """A Unix timestamp (ms, µs or ns) between 2020 and 2040."""
    scale = TIMESTAMP_SCALES.get(len(digits))
    return scale is not None and EPOCH_2020_MS * scale <= int(digits) < EPOCH_2040_MS * scale


def looks_like_card_number(digits: str) -> bool:
    return is_card_digits(digits) and not is_timestamp(digits)


def scan_bytes(data: bytes, where: str = "") -> list[Finding]:
    findings = _scan_plain(data, where)
    for match in BASE64_RUN.finditer(data):
        decoded = _decode_base64(match.group())
        if decoded:
            findings.extend(Finding(f"{where} (base64 at byte {match.start()})", match.start(), f.digits)
                            for f in _scan_plain(decoded, where))
    return findings


def _scan_plain(data: bytes, where: str) -> list[Finding]:
    findings = []
    for match in CANDIDATE.finditer(data):
        text = match.group().decode("ascii")
        digits = digits_of(text)
        # a timestamp is only ever bare; a grouped number is never one
        if is_card_digits(digits) and not (digits == text and is_timestamp(digits)):
            findings.append(Finding(where, match.start(), digits))
    return findings


def _decode_base64(token: bytes) -> bytes | None:
    try:
        return base64.b64decode(token.rstrip(b"=") + b"=" * (-len(token.rstrip(b"=")) % 4))
    except (binascii.Error, ValueError):
        return None


def scan_paths(paths: Iterable[Path]) -> list[Finding]:
    """Every regular file at or below the given paths (missing paths are skipped)."""
    findings = []
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            findings.extend(scan_bytes(file.read_bytes(), str(file)))
    return findings


def scan_records(records: Iterable) -> list[Finding]:
    """Keys and values of Kafka records (anything with topic, partition, offset, key, value)."""
    findings = []
    for record in records:
        where = f"{record.topic}/{record.partition}@{record.offset}"
        for part in (record.key, record.value):
            if part:
                findings.extend(scan_bytes(part if isinstance(part, bytes) else str(part).encode(), where))
    return findings
