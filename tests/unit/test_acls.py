"""Each component's ACLs on the secure broker name exactly its topics, groups and transactional ids."""

from __future__ import annotations

import pytest

from common.settings import Settings
from deploy.acls import COMPONENTS, component_grants


def allowed(component: str, s: Settings) -> set[tuple[str, str, str, str]]:
    return {(g.kind, g.name, g.pattern, g.operation) for g in component_grants(component, s)}


def test_the_producer_may_only_write_the_transactions_and_their_labels():
    s = Settings()
    assert allowed("producer", s) == {("TOPIC", t, "LITERAL", op) for t in ("transactions", "transactions.labels")
                                      for op in ("WRITE", "DESCRIBE")}


def test_the_detector_job_reads_transactions_and_writes_alerts_dead_letters_and_markers():
    got = allowed("detectors", Settings().replace(topic_alerts="a2"))
    assert ("TOPIC", "transactions", "LITERAL", "READ") in got
    assert not any(name == "transactions" and op == "WRITE" for _k, name, _p, op in got)
    for topic in ("a2", "transactions.dlq", "alerts.markers"):
        assert ("TOPIC", topic, "LITERAL", "WRITE") in got
    assert ("TRANSACTIONAL_ID", "fraud-writer.a2.", "PREFIXED", "WRITE") in got   # its writers' ids only
    assert not any(name in ("transactions.labels", "alerts.enriched", "cases") for _k, name, _p, _o in got)


def test_the_faust_services_get_their_topics_group_and_app_prefixed_internal_topics():
    s = Settings().replace(cases_app_id="c-app")
    got = allowed("cases", s)
    assert ("TOPIC", "alerts.enriched", "LITERAL", "READ") in got and ("TOPIC", "cases", "LITERAL", "WRITE") in got
    assert ("GROUP", "c-app", "LITERAL", "READ") in got
    assert ("TOPIC", "c-app-", "PREFIXED", "CREATE") in got          # its changelog c-app-card-cases-changelog
    assert not any(name in ("alerts", "transactions") for _k, name, _p, _o in got)
    enricher = allowed("enricher", s)
    assert ("TOPIC", "alerts", "LITERAL", "READ") in enricher and ("GROUP", "fraud-enricher", "LITERAL", "READ") in enricher
    assert not any(op == "WRITE" and name == "cases" for _k, name, _p, op in enricher)


def test_no_component_is_granted_anything_on_the_cluster_and_unknown_ones_are_refused():
    for component in COMPONENTS:
        assert all(g.kind != "CLUSTER" and g.operation not in ("ALL", "ALTER", "DELETE")
                   for g in component_grants(component, Settings()))
    with pytest.raises(ValueError, match="no component 'spark'"):
        component_grants("spark", Settings())


def test_the_dashboard_may_only_write_verdicts_and_the_analyst_only_set_parameters():
    s = Settings()
    assert allowed("dashboard", s) == {("TOPIC", s.topic_verdicts, "LITERAL", op) for op in ("WRITE", "DESCRIBE")}
    analyst = allowed("analyst", s)
    assert ("TOPIC", s.topic_params, "LITERAL", "WRITE") in analyst
    assert ("TRANSACTIONAL_ID", "fraud-params.", "PREFIXED", "WRITE") in analyst
    assert ("TOPIC", s.topic_verdicts, "LITERAL", "READ") in analyst         # backtest --verdicts-topic
    assert not any(op == "WRITE" and name in (s.topic_transactions, s.topic_alerts) for _k, name, _p, op in analyst)
