"""Every Redis key the downstream services write, in one place (profiles are ``common.contracts``).

All keys start with the namespace (``FRAUD_SINKS_NAMESPACE``, default ``fraud``), so several
deployments or test runs can share one Redis without seeing each other's cases.

| key                                   | type       | written by | content                                        |
|---------------------------------------|------------|------------|------------------------------------------------|
| {ns}:seen:enricher:{alert_id}         | string+TTL | enricher   | "1" once the enriched alert is acknowledged    |
| {ns}:card-alerts:{card_id}            | zset+TTL   | enricher   | alert_id -> event time (ms): recent alert count |
| {ns}:case:{case_id}                   | string(+TTL) | cases    | the case as JSON (latest version); TTL 7 days once closed |
| {ns}:cases:open                       | zset       | cases      | case_id -> updated_at (ms), open cases         |
| {ns}:cases:restored                   | hash       | cases      | partition -> run_id of the Redis its cases were written back to (another run_id: Redis restarted; rebuilt from the table) |
| {ns}:cases:closed                     | zset       | cases      | case_id -> updated_at (ms), newest 500 kept    |
| {ns}:alerts:latest                    | zset       | cases      | alert_id -> detected_at (ms), newest 1000 kept |
| {ns}:alerts:data                      | hash       | cases      | alert_id -> its summary JSON (same 1000), ingested_at kept, no latency_ms |
| {ns}:alerts:minute:{YYYYmmddHHMM}:{detector} | set+TTL | cases | alert_ids detected in that minute (UTC)       |
| {ns}:alerts:minutes                   | zset       | cases      | "{minute}:{detector}" -> minute (ms)           |
| {ns}:queries                          | hash       | detector job | query name -> progress totals, watermark, offsets_behind_latest (JSON) |
| {ns}:verdicts                         | hash       | dashboard  | case_id -> the analyst's verdict and when (JSON), after cases.verdicts acknowledged it |
| {ns}:params                           | hash       | detector job | detector -> parameters it runs with, their version, set_at, author, reason, applied_at (JSON) |

Every write is idempotent (SET, ZADD, SADD, HSET of the same member), so a redelivered alert
re-does them without counting anything twice.
"""

from __future__ import annotations

KEEP_LATEST_ALERTS = 1000
KEEP_CLOSED_CASES = 500


class RedisKeys:
    def __init__(self, namespace: str):
        self.ns = namespace

    def seen(self, service: str, alert_id: str) -> str:
        return f"{self.ns}:seen:{service}:{alert_id}"

    def card_alerts(self, card_id: str) -> str:
        return f"{self.ns}:card-alerts:{card_id}"

    def case(self, case_id: str) -> str:
        return f"{self.ns}:case:{case_id}"

    @property
    def open_cases(self) -> str:
        return f"{self.ns}:cases:open"

    @property
    def restored_partitions(self) -> str:
        return f"{self.ns}:cases:restored"

    @property
    def closed_cases(self) -> str:
        return f"{self.ns}:cases:closed"

    @property
    def verdicts(self) -> str:
        return f"{self.ns}:verdicts"

    @property
    def params(self) -> str:
        return f"{self.ns}:params"

    @property
    def latest_alerts(self) -> str:
        return f"{self.ns}:alerts:latest"

    @property
    def alert_data(self) -> str:
        return f"{self.ns}:alerts:data"

    def minute_set(self, minute: str, detector: str) -> str:
        return f"{self.ns}:alerts:minute:{minute}:{detector}"

    @property
    def minutes(self) -> str:
        return f"{self.ns}:alerts:minutes"

    @property
    def queries(self) -> str:
        return f"{self.ns}:queries"
