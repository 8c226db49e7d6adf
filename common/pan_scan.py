"""Find card numbers (PANs) in bytes, files and Kafka records: the check that none ever leaks out.

A finding is a card number as ``common.card_numbers`` defines it, in the bytes read as text and
normalised there (JSON escapes, UTF-16, full-width digits, any separators: the validator's and the dead
letters' masker's definition, so what one refuses the other two see). Base64 text (a run of 20 or more
base64 characters, as in a dead letter's ``key_base64``/``value_base64``) is decoded and scanned too, so
a number cannot hide in an encoding. Card numbers must never appear anywhere this project writes
(docs/architecture.md, "Contracts": cards are tokens).

One kind of digit run is not reported: a bare Unix timestamp in milliseconds, microseconds or
nanoseconds between 2020 and 2040 (13, 16 or 19 digits starting 15..22, e.g. Spark's checkpoint and log
fields ``batchTimestampMs``). One in ten of them passes Luhn by chance, and no card scheme issues numbers
of those lengths with those leading digits (Visa starts with 4, Mastercard 51-55 and 2221-2720, ...).

    findings = scan_bytes(data)                 # [Finding(where, offset, digits)]
    findings = scan_paths([log_dir, out_dir])   # every file below, read as bytes
    findings = scan_redis(client)               # every key and every value under it
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from common.card_numbers import digits_of, matches_in, normalise, text_of

# 20 base64 characters decode to 15 bytes, room for the shortest card number.
BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{20,}={0,2}")
EPOCH_2020_MS, EPOCH_2040_MS = 1_577_836_800_000, 2_208_988_800_000
TIMESTAMP_SCALES = {13: 1, 16: 1_000, 19: 1_000_000}   # digits -> units per millisecond


@dataclass(frozen=True)
class Finding:
    where: str          # file path, or topic/partition/offset of a record
    offset: int         # where the number starts in the normalised text (its byte offset in ASCII)
    digits: str = field(repr=False)   # kept out of reprs and test reports: a report must not leak it

    def __str__(self) -> str:
        # Never print the number itself: a report of a leak must not leak it again.
        return f"{self.where} @ {self.offset}: a Luhn-valid {len(self.digits)}-digit run " \
               f"({self.digits[:2]}...{self.digits[-2:]})"


def is_timestamp(digits: str) -> bool:
    """A Unix timestamp (ms, µs or ns) between 2020 and 2040."""
    scale = TIMESTAMP_SCALES.get(len(digits))
    return scale is not None and EPOCH_2020_MS * scale <= int(digits) < EPOCH_2040_MS * scale


def scan_bytes(data: bytes, where: str = "") -> list[Finding]:
    normal = normalise(text_of(data))
    findings = _scan_text(normal, where)
    for match in BASE64_RUN.finditer(normal):
        decoded = _decode_base64(match.group())
        if decoded:
            findings.extend(Finding(f"{where} (base64 at {match.start()})", match.start(), f.digits)
                            for f in _scan_text(normalise(text_of(decoded)), where))
    return findings


def _scan_text(normal: str, where: str) -> list[Finding]:
    findings = []
    for match in matches_in(normal):
        digits = digits_of(match.group())
        # a timestamp is only ever bare; a grouped number is never one
        if not (digits == match.group() and is_timestamp(digits)):
            findings.append(Finding(where, match.start(), digits))
    return findings


def _decode_base64(token: str) -> bytes | None:
    try:
        return base64.b64decode(token.rstrip("=") + "=" * (-len(token.rstrip("=")) % 4))
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


def scan_redis(client, match: str | None = None) -> list[Finding]:
    """Every key of a Redis database (those matching ``match``) and everything stored under it: strings,
    hashes, lists, sets, sorted sets and streams, read as they are (``DUMP`` may compress them). A
    finding names the key by its place in the scan, never by the key itself."""
    findings = []
    for i, key in enumerate(client.scan_iter(match=match, count=1000)):
        where = f"redis key #{i}"
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            parts = [client.get(key)]
        elif kind == "hash":
            parts = [part for pair in client.hgetall(key).items() for part in pair]
        elif kind == "list":
            parts = client.lrange(key, 0, -1)
        elif kind == "set":
            parts = list(client.smembers(key))
        elif kind == "zset":
            parts = client.zrange(key, 0, -1)
        elif kind == "stream":
            parts = [part for _, entry in client.xrange(key) for pair in entry.items() for part in pair]
        else:                       # gone since the scan found it
            parts = []
        for part in [key, *parts]:
            if part:
                findings.extend(scan_bytes(part if isinstance(part, bytes) else str(part).encode(), where))
    return findings
