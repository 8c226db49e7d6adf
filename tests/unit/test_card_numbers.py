"""Card numbers in every form are refused in every id, never quoted in a reason or a log, and masked."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common import card_numbers as CN
from common.card_numbers import card_numbers_in, mask_card_numbers, safe_excerpt
from common.contracts import ID_FIELDS, ContractError, decode_transaction
from common.pan_scan import scan_bytes
from sinks import cases, enricher
from tests.builders import BASE_TIME, make_alert, pan_like, txn
from tests.strategies import disguised, json_escaped, pan_of_length

pytestmark = pytest.mark.unit


def forms(pan: str) -> list[str]:
    spaced = " ".join(pan[i:i + 4] for i in range(0, len(pan), 4))
    return [pan, spaced, spaced.replace(" ", "-"), "card-" + pan, " " + pan, pan + "\n"]


def record(**fields) -> bytes:
    return json.dumps(txn(0) | fields).encode()


@pytest.mark.parametrize("name", ID_FIELDS)
def test_a_card_number_in_any_form_in_any_id_field_is_refused_with_a_contract_error(name):
    for form in forms(pan_like()):
        with pytest.raises(ContractError, match=f"^{name} holds a card number"):
            decode_transaction(record(**{name: form}))
    decode_transaction(record(**{name: "txn-1234-00001-000042"}))     # dashed digits of an id are not one


@pytest.mark.parametrize("name, text, reason", [
    ("currency", "EUR\n", "currency is not"), ("mcc", "5411\n", "mcc is not"),
    ("mcc", "\u0665\u0664\u0661\u0661", "mcc is not"), ("mcc", "\uff15\uff14\uff11\uff11", "mcc is not"),
    ("event_time", "2026-11-22T10:15:30.123Z\n", "event_time is not ISO-8601"),
    ("event_time", "\u0662\u0660\u0662\u0666-11-22T10:15:30.123Z", "event_time is not ISO-8601"),
])
def test_patterns_match_the_whole_string_in_ascii_digits(name, text, reason):
    """Python's $ matched before a trailing newline and its \\d took any script's digits; Spark's did not."""
    with pytest.raises(ContractError, match=f"^{reason}"):
        decode_transaction(record(**{name: text}))


def test_reasons_never_quote_a_card_number():
    pan = pan_like()
    for fields in ({"amount": int(pan)}, {"amount": -int(pan)}, {"lat": int(pan)},
                   {"event_time": pan + " 10:00"}):
        with pytest.raises(ContractError) as error:
            decode_transaction(record(**fields))
        assert pan not in str(error.value) and not scan_bytes(str(error.value).encode()), fields


def test_masking_keeps_the_length_and_at_most_the_first_six_and_last_four_digits():
    pan = pan_like()
    masked = pan[:6] + "*" * 6 + pan[-4:]
    for prefix, form in zip(["", "", "", "card-"], forms(pan)[:4]):
        assert card_numbers_in(f"x {form} y") == [form[len(prefix):]]
        assert mask_card_numbers(f'{{"pan":"{form}"}}') == f'{{"pan":"{prefix}{masked}"}}'
    score = "0." + "9876543210" + "987654"             # 16 fraction digits: a score, not a card
    assert mask_card_numbers(f"txn-1234-00001-000042 2026-11-22 {score}") == \
        f"txn-1234-00001-000042 2026-11-22 {score}"
    cut = safe_excerpt(b"x" * 190 + pan.encode() + b"9999", limit=200)   # the cut leaves 7 digits of it
    assert not scan_bytes(cut.encode())


def test_the_services_log_a_rejected_alert_without_its_card_number(caplog):
    pan = pan_like()
    bad = make_alert(pan, ["t1"]) | {"score": 7}                     # breaks the contract, names a card
    caplog.set_level(logging.ERROR)

    async def publish(records):
        raise AssertionError("nothing to publish")

    result = asyncio.run(enricher.process_batch([json.dumps(bad)], None, publish, BASE_TIME))
    assert result.invalid == 1
    assert asyncio.run(cases.handle_enriched(json.dumps(bad).encode(), {}, None, None)) == []
    assert len(caplog.records) == 2 and pan[:6] in caplog.text
    assert not scan_bytes(caplog.text.encode())


def test_a_json_escape_of_half_a_surrogate_pair_is_not_valid_json():
    """Spark's parser turns it into "?": the record would pass both validators with different ids."""
    for text in ("t-1\ud800", "t-1\udcb3", "\\\ud800"):
        with pytest.raises(ContractError, match="^value is not valid JSON"):
            decode_transaction(record(txn_id=text))
    for text in ("t-\U0001f4b3", "t-\\ud800"):                       # a pair; an escaped backslash and "ud800"
        assert decode_transaction(record(txn_id=text))["txn_id"] == text


# The definition as written first, each alternative's look-behinds before its first digit: the pattern in
# use matches that digit first (a scan fails at once where there is none) and must find the same.
_SEP = "[^0-9A-Za-z]{1,2}"
_READABLE_BARE = r"(?<![0-9])(?<![0-9]\.)[0-9]{13,19}(?![0-9])"
_READABLE_GROUPED = (rf"(?<![0-9])(?<![0-9][^0-9A-Za-z])"
                     rf"(?:[0-9]{{4}}(?:{_SEP}[0-9]{{4}}){{2}}(?:{_SEP}[0-9]{{4}})?(?:{_SEP}[0-9]{{1,4}})?"
                     rf"|[0-9]{{4}}{_SEP}[0-9]{{6}}{_SEP}[0-9]{{4,5}})"
                     rf"(?![0-9])(?![^0-9A-Za-z][0-9])")


def test_the_candidate_pattern_finds_what_its_readable_definition_finds():
    readable = re.compile(f"{_READABLE_BARE}|{_READABLE_GROUPED}")
    rng = random.Random(7)
    pan = pan_like()                      # built at run time: no card number is written in the repo
    spaced = " ".join(pan[i:i + 4] for i in range(0, len(pan), 4))
    four_six_five = f"{pan[:4]} {pan[4:10]} {pan[10:15]}"
    pieces = [pan, spaced, spaced.replace(" ", "-"), four_six_five, "1234", "12345", "0.", ".", " ", "-", "a",
              "x", "Z", "9", "00", "\n", "_", "..", "  ", "card", "txn-7-00001-000042", "2026-11-28"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    texts += ["".join(rng.choice("0123456789 -._aZ") for _ in range(rng.randint(1, 60))) for _ in range(20_000)]
    for text in texts:
        assert [(m.start(), m.group()) for m in CN.CANDIDATE_RE.finditer(text)] == \
               [(m.start(), m.group()) for m in readable.finditer(text)], text


def test_the_disguises_a_probe_found_are_card_numbers():
    pan = pan_like()
    groups = [pan[i:i + 4] for i in range(0, 16, 4)]
    for text in ["card" + pan, ".".join(groups), "_".join(groups), "\u00a0".join(groups), "  ".join(groups),
                 pan.translate(str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10))))]:
        with pytest.raises(ContractError, match="^card_id holds a card number"):
            decode_transaction(record(card_id=text))
        assert mask_card_numbers(text).count("*") == 6, text


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(CN.MIN_DIGITS, CN.MAX_DIGITS), st.sampled_from(ID_FIELDS))
def test_a_disguised_card_number_is_refused_masked_and_found_in_any_encoding(rng, length, name):
    """The validator, the masker and the scanner read one normalised text: what one sees, all see."""
    text = disguised(rng, pan_of_length(rng, length))
    with pytest.raises(ContractError, match=f"^{name} holds a card number"):
        decode_transaction(record(**{name: text}))
    raw = '{"note":' + json_escaped(rng, text) + ',"n":1}'
    for data in (raw.encode(), raw.encode("utf-16"), raw.encode("utf-16-le"), raw.encode("utf-16-be")):
        assert scan_bytes(data), data
        assert CN.holds_card_number(CN.text_of(data))
    masked = mask_card_numbers(raw)
    assert masked != raw and not scan_bytes(masked.encode()) and not CN.holds_card_number(masked)


def test_a_number_across_the_cut_of_an_excerpt_is_masked_before_the_cut():
    pan = pan_like()
    for at in range(180, 200):
        excerpt = safe_excerpt(("x" * at + pan).encode(), limit=200)
        assert pan[:7] not in excerpt, at                # at most the first six digits, then the mask


def test_hashes_and_the_projects_ids_are_not_card_numbers():
    """One in two hundred SHA-256 sums holds a Luhn-valid decimal run of 13 digits or more."""
    import hashlib

    from common.contracts import alert_id
    from sinks.case_logic import case_id_for

    for i in range(5_000):
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        ids = [digest, digest[:CN.HASH_CHARS], alert_id("velocity", [f"t-{i}"]), case_id_for(f"card-{i}", digest)]
        assert not any(CN.holds_card_number(text) for text in ids), i
