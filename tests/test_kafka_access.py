"""check_kafka_access against the real broker: without an authorizer it reports no operations, so a
principal may use its topics and group (the SASL_SSL refusals are in tests/test_kafka_secure.py)."""

from __future__ import annotations

from services.runtime.checks import check_kafka_access


def test_topics_and_group_pass_on_a_broker_without_an_authorizer(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    # It raised "Broker handle destroyed" for every topic when its admin client was dropped too early.
    check_kafka_access(
        kafka_bootstrap,
        reads=[topic_names["events"]],
        writes=[topic_names["compacted"]],
        group=f"{topic_names['events']}-probe",
        service="the test",
        timeout=10,
    )
