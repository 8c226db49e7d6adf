"""Generated Kafka records: valid transactions and every way of breaking the contract.

Hypothesis draws a seeded ``random.Random`` and ``kafka_records(rng, n)`` expands it into ``n``
records (a list of hundreds of rich records is more than hypothesis's own buffers hold).
"""

from __future__ import annotations

import json
import random
from datetime import timedelta

from common.contracts import CHANNELS, MAX_VALUE_BYTES, format_event_time, luhn_valid
from tests.builders import T0, pan_like

FIELDS = ["txn_id", "card_id", "customer_id", "merchant_id", "terminal_id", "amount", "currency",
          "event_time", "channel", "mcc", "lat", "lon"]
WRONG_VALUES = [None, 7, 1.5, True, "x", "", [1], {"a": 1}, -3, 12.345, "2026-11-22 10:00:00",
                "1999-12-31T23:59:59.999Z", "2099-01-01T00:00:00.000Z", "2026-02-30T10:00:00.000Z",
                pan_like(), "eur", "web", "54111", 91.0, -181.0, 1e9, 1e400, " ", 0.1, 100]
KINDS = ["good", "good", "good", "field", "field", "missing", "bytes", "key", "shape", "id", "text"]
ID_FIELDS = FIELDS[:5]


def pan_forms(pan: str) -> list[str]:
    """A card number as people write it: bare, spaced, dashed, inside an id, with a trailing newline."""
    spaced = " ".join(pan[i:i + 4] for i in range(0, len(pan), 4))
    return [pan, spaced, spaced.replace(" ", "-"), "card-" + pan, pan + "\n", " " + spaced,
            pan[:4] + " " + pan[4:10] + " " + pan[10:]]


ARABIC_DIGITS = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")
FULLWIDTH_DIGITS = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))

# What a card number is disguised with (common.card_numbers reads through each): separators other than a
# space or a dash, letters glued on, digits of other scripts, invisible characters.
SEPARATORS = [" ", "-", ".", "_", "/", ",", "  ", "\u00a0", "\u2009", "\u3000", "\t", " -"]
GLUE = ["", "", "card", "PAN", "x", "tok_", "id:"]
SCRIPTS = [str.maketrans({}), FULLWIDTH_DIGITS, ARABIC_DIGITS,
           str.maketrans("0123456789", "".join(chr(0x0966 + d) for d in range(10)))]
INVISIBLE = ["\u200b", "\u200d", "\ufeff", "\u00ad"]


def disguised(rng: random.Random, pan: str) -> str:
    """``pan`` written to slip past a check of ASCII digits with single spaces or dashes, standing alone."""
    if len(pan) == 16 and rng.random() < 0.7:
        groups = [pan[i:i + 4] for i in range(0, 16, 4)]
    elif len(pan) == 15 and rng.random() < 0.5:
        groups = [pan[:4], pan[4:10], pan[10:]]
    else:
        groups = [pan]
    text = rng.choice(SEPARATORS).join(groups)
    if rng.random() < 0.5:
        text = text.translate(rng.choice(SCRIPTS))
    if rng.random() < 0.3:
        at = rng.randint(1, len(text) - 1)
        text = text[:at] + rng.choice(INVISIBLE) + text[at:]
    return rng.choice(GLUE) + text + rng.choice(["", "", "EUR", "z", "."])


def json_escaped(rng: random.Random, text: str) -> str:
    """``text`` as a JSON string literal with some characters written as \\u escapes."""
    body = "".join(f"\\u{ord(ch):04x}" if rng.random() < 0.3 and ord(ch) < 0x10000 else ch for ch in text)
    return '"' + body.replace('"', '\\"') + '"'


def odd_text(rng: random.Random, good: str) -> str:
    """Text a careless or hostile producer sends where a short ASCII string belongs."""
    return rng.choice([
        good + "\n", good + "\r", good + "\u2028", "\n" + good, good.translate(ARABIC_DIGITS),
        good.translate(FULLWIDTH_DIGITS), good + "\ud800", "\U0001f4b3" * rng.choice([1, 128, 129]),
        "x" * rng.choice([127, 128, 129, 200, 5000]), "\u00e9" * rng.choice([128, 129]),
    ])



def _id(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789-", k=rng.randint(1, 16)))


def valid_transaction(rng: random.Random) -> dict:
    channel = rng.choice(CHANNELS)
    located = channel != "ecom"
    return {
        "txn_id": _id(rng, "t-"), "card_id": _id(rng, "card-"), "customer_id": _id(rng, "c-"),
        "merchant_id": _id(rng, "m-"), "terminal_id": _id(rng, "term-"),
        "amount": rng.randint(0, 1_000_000) / 100,
        "currency": rng.choice(["EUR", "USD", "GBP"]),
        "event_time": format_event_time(T0 + timedelta(milliseconds=rng.randint(0, 86_400_000))),
        "channel": channel, "mcc": rng.choice(["5411", "5812", "6011", "4829"]),
        "lat": round(rng.uniform(-90, 90), 5) if located else None,
        "lon": round(rng.uniform(-180, 180), 5) if located else None,
    }


def pan_of_length(rng: random.Random, length: int) -> str:
    """A random Luhn-valid number of ``length`` digits, made at run time."""
    body = str(rng.choice([3, 4, 5, 6])) + "".join(rng.choices("0123456789", k=length - 2))
    return next(body + str(d) for d in range(10) if luhn_valid(body + str(d)))


def _dump(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def kafka_record(rng: random.Random) -> tuple[bytes | None, bytes]:
    """(key, value) as it could arrive on the topic: mostly good, often broken in one way."""
    txn = valid_transaction(rng)
    key: bytes | None = txn["card_id"].encode()
    kind = rng.choice(KINDS)
    if kind == "field":
        txn[rng.choice(FIELDS)] = rng.choice(WRONG_VALUES)
    elif kind == "missing":
        del txn[rng.choice(FIELDS)]
    elif kind == "key":
        key = rng.choice([None, b"", b"someone-else", txn["card_id"].upper().encode()])
    elif kind == "id":                      # a card number, in any of its forms, in any id field
        name = rng.choice(ID_FIELDS)
        pan = rng.choice([pan_like(), pan_of_length(rng, rng.randint(13, 19))])
        txn[name] = rng.choice(pan_forms(pan) + [disguised(rng, pan)])
        key = txn["card_id"].encode()
    elif kind == "text":                    # newlines, non-ASCII digits, surrogates, ids over 128 characters
        name = rng.choice(ID_FIELDS + ["currency", "event_time", "channel", "mcc"])
        txn[name] = odd_text(rng, txn[name])
        key = txn["card_id"].encode("utf-8", "surrogatepass")
    value = _dump(txn)
    if kind == "bytes":
        value = rng.choice([
            value[: len(value) // 2], value + b"}", value + b" trailing", b"\xff\xfe" + value,
            value.replace(b"{", b'{"txn_id":"dup",', 1), b"", b"null", b"[]", b"42", b'"text"',
            value[:-1] + b',"padding":"' + b"x" * MAX_VALUE_BYTES + b'"}', b"{'single': 'quotes'}",
            value.replace(b'"amount":', b'"amount":NaN,"x":', 1), value + b"\n",
            # JSON whitespace before the value: an object is still one, a list still is not
            b" \t\r\n" + value, b"\n [1, 2]", b"\t\"{not an object}\"",
            # top-level scalars, and UTF-8 that is not: overlong encodings, encoded surrogates
            b"true", b"false", b"1.5", b"-0.0", b"1e5", b"12", b"123456789012345678901234567890",
            value.replace(b"{", b"{\"x\":\"\xc0\xaf\",", 1), value.replace(b"{", b"{\"x\":\"\xed\xa0\x80\",", 1),
            value.replace(b"{", b"{\"x\":\"\xe0\x80\xaf\",", 1), value.replace(b"{", b"{\"x\":\"\xf4\x90\x80\x80\",", 1),
        ])
    elif kind == "shape":
        value = _dump([txn]) if rng.random() < 0.5 else _dump({"transaction": txn})
    return key, value


def kafka_records(rng: random.Random, count: int) -> list[tuple[bytes | None, bytes]]:
    return [kafka_record(rng) for _ in range(count)]
