"""Bad input becomes dead-letter records with a reason; good input is processed; nothing is lost.

Property-based: hypothesis generates thousands of records, mostly valid, many broken in one of the
ways a real topic sees (wrong types, missing fields, bad timestamps, broken JSON, non-UTF-8, oversized
values, wrong keys). ``common.contracts.decode_transaction`` is the specification; the Spark validation
must agree with it, and the running pipeline must dead-letter exactly the records it rejects.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, Phase, given, settings as hsettings
from hypothesis import strategies as st

from common.card_numbers import masked_copy
from common.contracts import EVENT_TIME_MAX_AHEAD, ContractError, alert_id, decode_transaction, format_event_time
from common.kafka_io import make_producer, read_topic
from common.pan_scan import scan_bytes, scan_records
from common.waiting import wait_until
from spark_job.dead_letters import MAX_DLQ_KEY_BYTES, MAX_DLQ_ORIGINAL_BYTES, dlq_values
from spark_job.parsing import with_validation
from spark_job.queries import RunOptions, start_detectors
from detectors.base import TRANSACTION_SCHEMA
from producers.simulator import SimConfig, Simulator
from tests.builders import pan_like
from tests.strategies import disguised, json_escaped, kafka_records, pan_forms, pan_of_length, valid_transaction

RECORD_TIME = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def slow(max_examples: int):
    """Each example runs Spark: few examples, no per-example deadline, reproducible."""
    return hsettings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                     max_examples=max_examples, database=None,
                     phases=[Phase.explicit, Phase.generate])  # shrinking would re-run Spark for minutes


def expected_reason(key: bytes | None, value: bytes | None) -> str | None:
    try:
        decode_transaction(value, key=key, record_time=RECORD_TIME, check_key=True)
        return None
    except ContractError as error:
        return str(error).split(":")[0]


@slow(max_examples=8)
@given(st.integers(0, 2**32))
def test_spark_validation_agrees_with_the_contract(spark, seed):
    records = kafka_records(random.Random(seed), 400)
    got = {r.offset: r._reason for r in _validated(spark, records).select("offset", "_reason").collect()}
    for offset, (key, value) in enumerate(records):
        want = expected_reason(key, value)
        reason = got[offset]
        assert (reason and reason.split(":")[0]) == want, (key, value[:300] if value else value)


def _validated(spark, records, max_ahead: timedelta = EVENT_TIME_MAX_AHEAD):
    rows = [(key, value, "transactions", 0, offset, RECORD_TIME.replace(tzinfo=None))
            for offset, (key, value) in enumerate(records)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                     "timestamp timestamp")
    return with_validation(df, max_ahead)


@pytest.mark.parametrize("max_ahead", [EVENT_TIME_MAX_AHEAD, timedelta(milliseconds=1500), timedelta(hours=2)],
                         ids=["default", "1.5s", "2h"])
def test_event_time_may_lead_the_records_timestamp_by_the_bound_and_no_more(spark, max_ahead):
    """A clock a day fast is dead-lettered, not let in to move every watermark past real traffic: the
    bound (FRAUD_EVENT_TIME_MAX_AHEAD_S) holds to the millisecond, in the contract and in Spark alike."""
    rng = random.Random(3)
    leads = [timedelta(0), max_ahead, max_ahead + timedelta(milliseconds=1), timedelta(days=1) - timedelta(seconds=1)]
    txns = [dict(valid_transaction(rng), event_time=format_event_time(RECORD_TIME + lead)) for lead in leads]
    records = [(t["card_id"].encode(), json.dumps(t).encode()) for t in txns]
    got = [r._reason for r in _validated(spark, records, max_ahead).orderBy("offset").collect()]

    def want(key, value):
        try:
            decode_transaction(value, key=key, record_time=RECORD_TIME, check_key=True, max_ahead=max_ahead)
            return None
        except ContractError as error:
            return str(error).split(":")[0]

    seconds = f"{max_ahead.total_seconds():g}"
    assert [want(*r) for r in records] == [(reason and reason.split(":")[0]) for reason in got] == [
        None, None, *[f"event_time is more than {seconds} s ahead of the record's timestamp"] * 2]


def test_valid_records_give_the_contracts_transaction(spark):
    """Every valid record, however it is written (the producers' compact form, spaces, another key order,
    exponents, escapes), gives the fields ``decode_transaction`` returns, typed."""
    rng = random.Random(7)
    txns = [valid_transaction(rng) for _ in range(300)]
    txns[0].update(amount=0, lat=-0.5, lon=180)                     # integral amount, edge coordinates
    txns[1].update(amount=12.1, lat=None, lon=None)
    for txn in txns[2:20]:
        txn.pop("lat"), txn.pop("lon")                              # e-commerce without coordinates
    records = [(t["card_id"].encode(), json.dumps(t, separators=(",", ":")).encode()) for t in txns]
    records += [(key, b" " + json.dumps(dict(reversed(json.loads(value).items())), indent=1).encode())
                for key, value in records[:100]]
    records.append((b"card-x", b'{"txn_id":"t\\u00e9","card_id":"card-x","customer_id":"c","merchant_id":"m",'
                                b'"terminal_id":"t","amount":1.5E1,"currency":"EUR","event_time":'
                                b'"2026-11-22T11:00:00.250Z","channel":"pos","mcc":"5411","lat":45,"lon":-7.25e0}'))
    records += [(json.loads(v)["card_id"].encode(), v)
                for batch in Simulator(SimConfig(seed=5, customers=300)).take(300) for v in batch.values]
    rows = _validated(spark, records).select("offset", "_reason", *TRANSACTION_SCHEMA.fieldNames()).collect()

    for row in rows:
        key, value = records[row.offset]
        want = decode_transaction(value, key=key, record_time=RECORD_TIME, check_key=True)
        assert row._reason is None, (row._reason, value)
        got = row.asDict()
        event_time = got.pop("event_time").replace(tzinfo=timezone.utc)
        assert event_time == datetime.strptime(want["event_time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        assert got.pop("ingested_at") == RECORD_TIME.replace(tzinfo=None)
        assert {name: got[name] for name in got if name not in ("offset", "_reason")} == \
            {name: want.get(name) for name in got if name not in ("offset", "_reason")}


@slow(max_examples=1)
@given(st.integers(0, 2**32))
def test_every_bad_record_is_dead_lettered_and_every_good_one_processed(stack, topics, spark, tmp_path_factory,
                                                                       seed):
    records = kafka_records(random.Random(seed), 2500)
    from tests.detectors_for_tests import EVERY_TRANSACTION

    s = stack.replace(topic_transactions=topics("transactions", partitions=3), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    producer = make_producer(s, max_request_size=4 * 1024 * 1024)
    sent = []
    for key, value in records:
        metadata = producer.send(s.topic_transactions, key=key, value=value).get(timeout=30)
        # The contract judges event times against the record's broker timestamp.
        record_time = datetime.fromtimestamp(metadata.timestamp / 1000, timezone.utc)
        try:
            txn = decode_transaction(value, key=key, record_time=record_time, check_key=True)
            sent.append(("good", txn["txn_id"], metadata))
        except ContractError as error:
            sent.append(("bad", str(error).split(":")[0], metadata))
    producer.close()
    good = sorted(txn_id for kind, txn_id, _ in sent if kind == "good")  # generated ids may repeat
    bad = {(m.partition, m.offset): reason for kind, reason, m in sent if kind == "bad"}
    assert len(good) > 500 and len(bad) > 500

    queries = start_detectors(spark, [EVERY_TRANSACTION], s,
                              RunOptions(checkpoint_root=tmp_path_factory.mktemp("checkpoints")))
    try:
        dlq = read_topic(s, s.topic_dlq, min_records=len(bad), timeout=240)
        alerts = read_topic(s, s.topic_alerts, min_records=len(good), timeout=240)
    finally:
        for query in queries:
            query.stop()

    dead = {}
    for record in dlq:
        letter = json.loads(record.value)
        dead[(letter["source_partition"], letter["source_offset"])] = letter
    assert set(dead) == set(bad)                                   # every bad one, nothing else
    for position, letter in dead.items():
        assert letter["reason"].split(":")[0] == bad[position]
        assert letter["source_topic"] == s.topic_transactions
        copy = base64.b64decode(letter["value_base64"])
        assert letter["value_truncated"] or letter["card_number_masked"] or len(copy) == letter["value_size"]
    assert scan_records(dlq) == []                                 # card numbers were sent, none came back
    processed = sorted(json.loads(r.value)["txn_ids"][0] for r in alerts)
    assert processed == good                                       # every good one, once
    assert sorted(json.loads(r.value)["alert_id"] for r in alerts) == sorted(
        alert_id("every_transaction", [t]) for t in good)


HASH_KEY = b"a key of the tests"


def _dead_letters(spark, records):
    rows = [("bad", key, value, "transactions", 0, offset, RECORD_TIME.replace(tzinfo=None))
            for offset, (key, value) in enumerate(records)]
    df = spark.createDataFrame(rows, "reason string, key binary, value binary, topic string, partition int, "
                                     "offset long, timestamp timestamp")
    return [(row.key, json.loads(row.value)) for row in dlq_values(df, HASH_KEY).orderBy("offset").collect()]


def test_a_dead_letter_caps_and_hashes_the_key_and_masks_card_numbers(spark):
    """Keys are capped and hashed like values; a card number anywhere, however disguised, is masked in the
    copy (as ``common.card_numbers.masked_copy`` does) and the original's hash is keyed; everything else is
    kept byte for byte."""
    pan = pan_like()
    huge_key, huge_value = b"k" * 600_000, b"v" * 300_000
    records = [(huge_key, huge_value), (pan.encode(), json.dumps({"card_id": pan, "note": pan_forms(pan)[1]}).encode()),
               (b"card-1", b"\xff\xfe not utf-8"), (None, None),
               (b"k" * (MAX_DLQ_KEY_BYTES - 6) + pan.encode()[:10], b"x"),    # the cut leaves no number behind
               (b"k", b"x" * (MAX_DLQ_ORIGINAL_BYTES - 8) + pan.encode()),    # a number across the cut
               (b"k", ('{"card_id":"\\u0034' + pan[1:] + '"}').encode()),     # the escape a probe found
               (b"k", json.dumps({"card_id": pan}).encode("utf-16"))]
    rng = random.Random(3)
    for _ in range(200):
        text = disguised(rng, pan_of_length(rng, rng.randint(13, 19)))
        raw = ('{"card_id":' + json_escaped(rng, text) + "}").encode(rng.choice(["utf-8", "utf-16-le", "utf-16-be"]))
        records.append((rng.choice([b"k", text.encode()]), raw))
    records += [(key, value) for key, value in kafka_records(rng, 400) if value]
    letters = _dead_letters(spark, records)

    for (key, value), (dlq_key, letter) in zip(records, letters):
        for part, original, limit in (("key", key, MAX_DLQ_KEY_BYTES), ("value", value, MAX_DLQ_ORIGINAL_BYTES)):
            original = original or b""
            copy = base64.b64decode(letter.get(f"{part}_base64", ""))
            assert letter[f"{part}_size"] == len(original) and letter[f"{part}_truncated"] == (len(original) > limit)
            capped, masked = original[:limit], masked_copy(original, limit)
            if masked is not None:
                assert copy == masked, original[:200]
                assert f"{part}_sha256" not in letter
                assert letter[f"{part}_hmac_sha256"] == hmac.new(HASH_KEY, original, hashlib.sha256).hexdigest()
                assert letter["card_number_masked"]
            else:
                assert copy == capped and f"{part}_hmac_sha256" not in letter
                assert letter[f"{part}_sha256"] == hashlib.sha256(original).hexdigest()
        assert dlq_key == (None if key is None else base64.b64decode(letter["key_base64"]).decode("utf-8", "replace"))
        assert not scan_bytes(json.dumps(letter).encode()) and not scan_bytes((dlq_key or "").encode())
        assert len(json.dumps(letter)) + len(dlq_key or "") < 512 * 1024
    assert letters[1][0] == pan[:6] + "******" + pan[-4:]
    assert all(letter["card_number_masked"] for _, letter in letters[5:208])
    assert sum(letter["card_number_masked"] for _, letter in letters) > 220


def test_a_huge_key_and_card_numbers_do_not_stop_the_dead_letters(stack, topics, spark, tmp_path_factory):
    """A 600 KB key made a dead letter over the producer's 1 MiB limit: the transaction aborted, every
    replay failed the same way and, with --shared, every detector stopped with it."""
    from tests.detectors_for_tests import EVERY_TRANSACTION

    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 1),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    pan, rng = pan_like(), random.Random(11)
    good = valid_transaction(rng)
    with_pan = valid_transaction(rng) | {"card_id": pan}
    spaced = valid_transaction(rng) | {"merchant_id": pan_forms(pan)[1]}
    records = [(b"k" * 600_000, b"not json"), (pan.encode(), json.dumps(with_pan).encode()),
               (spaced["card_id"].encode(), json.dumps(spaced).encode()),
               (good["card_id"].encode(), json.dumps(good).encode())]
    producer = make_producer(s, max_request_size=4 * 1024 * 1024)
    for key, value in records:
        producer.send(s.topic_transactions, key=key, value=value).get(timeout=30)
    producer.close()

    queries = start_detectors(spark, [EVERY_TRANSACTION], s,
                              RunOptions(checkpoint_root=tmp_path_factory.mktemp("checkpoints"), shared=True))
    try:
        def arrived():
            stopped = [q for q in queries if not q.isActive]
            assert not stopped, stopped[0].exception()
            dead = read_topic(s, s.topic_dlq, timeout=30)
            return dead if len(dead) >= 3 else None
        dlq = wait_until(arrived, timeout=240, what="three dead letters")
        alerts = read_topic(s, s.topic_alerts, min_records=1, timeout=120)
        assert all(q.isActive for q in queries)
    finally:
        for query in queries:
            query.stop()

    letters = sorted((json.loads(r.value) for r in dlq), key=lambda letter: letter["source_offset"])
    assert [letter["reason"] for letter in letters] == [
        "value is not valid JSON", "card_id holds a card number (PAN); ids must be tokens",
        "merchant_id holds a card number (PAN); ids must be tokens"]
    huge = next(letter for letter in letters if letter["key_size"] == 600_000)
    assert huge["key_truncated"] and len(base64.b64decode(huge["key_base64"])) == MAX_DLQ_KEY_BYTES
    assert [json.loads(r.value)["txn_ids"] for r in alerts] == [[good["txn_id"]]]
    assert scan_records(dlq) == []                                 # keys, values and their base64 fields
