"""The card-number scan reads every kind of Redis value (common.pan_scan.scan_redis), on the real Redis."""

from __future__ import annotations

import pytest

from common.pan_scan import scan_redis
from tests.builders import pan_like

pytestmark = pytest.mark.integration


def test_a_card_number_under_any_kind_of_key_is_found_and_the_report_does_not_name_it(redis_client, unique):
    pan = pan_like()
    spaced = " ".join(pan[i:i + 4] for i in range(0, 16, 4))
    redis_client.set(f"{unique}:s", "card-1")
    redis_client.hset(f"{unique}:h", mapping={"a": "1", "b": "2"})
    assert scan_redis(redis_client, match=f"*{unique}*") == []

    redis_client.set(f"{unique}:string", '{"card_id":"\\u0034' + pan[1:] + '"}')
    redis_client.hset(f"{unique}:hash", mapping={"note": spaced})
    redis_client.rpush(f"{unique}:list", "ok", "card" + pan)
    redis_client.sadd(f"{unique}:set", pan.replace("4", "\uff14"))
    redis_client.zadd(f"{unique}:zset", {"_".join(spaced.split()): 1.0})
    redis_client.xadd(f"{unique}:stream", {"pan": pan})
    redis_client.set(f"{unique}:{pan}", "1")
    findings = scan_redis(redis_client, match=f"*{unique}*")
    assert sorted(f.digits for f in findings) == [pan] * 7
    assert all(pan not in str(f) and pan[:7] not in str(f) for f in findings)
