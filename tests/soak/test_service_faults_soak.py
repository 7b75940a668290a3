"""Soak (``make soak``, not in ``make test``): the service-fault tests, every fault and repeated.
``make test`` runs a subset (``test_service_faults_kafka.LIGHT``, ``test_service_faults_postgres.LIGHT``)."""

from __future__ import annotations

import pytest

from tests.integration import test_service_faults_kafka as kafka_faults
from tests.integration.test_service_faults_kafka import broker, cluster  # noqa: F401 - fixtures by name
from tests.integration.test_service_faults_postgres import (  # noqa: F401 - fixture used by name
    FAULTS,
    check_exactly_once,
    run_with_crash,
    server,
)

pytestmark = [pytest.mark.integration, pytest.mark.soak]

REPEATS = 3


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_postgres_crash_every_fault(server, tmp_path, name, repeat):  # noqa: F811
    schema, _run, _restarted = run_with_crash(server, tmp_path, FAULTS[name])
    check_exactly_once(server.dsn, schema)


BROKER_KILLS = [(query, name) for name, kill in sorted(kafka_faults.KILLS.items()) for query in kill.queries]


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize(("query", "name"), BROKER_KILLS)
def test_broker_killed_at_every_point_repeated(broker, pg_dsn, pg_schema, tmp_path, query, name,  # noqa: F811
                                               repeat):
    kafka_faults.run_kill(query, name, broker, tmp_path, pg_dsn, pg_schema)


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_cluster_node_killed_repeated(cluster, tmp_path, repeat):  # noqa: F811
    kafka_faults.test_node_killed_in_a_three_node_cluster(cluster, tmp_path)
