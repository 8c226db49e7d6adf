"""``python -m deploy.create_topics [--timeout S]``: wait for the broker, then create the project topics.

The one-shot ``topics`` service of ``deploy/docker-compose.yml`` runs this, so the containers get
exactly the topics, partition counts and configs of the local stack (``deploy/topics.py``); the
broker comes from ``FRAUD_KAFKA_BOOTSTRAP``, the counts from ``FRAUD_PARTITIONS_*`` and
``FRAUD_REPLICATION_FACTOR``. Idempotent: topics that exist are left alone. Exit status 0 when every
project topic exists, 1 when the broker did not answer in time.
"""

from __future__ import annotations

import argparse
import sys

from common.cli_errors import ArgumentParser, fail, positive_float, run_command
from common.settings import get_settings
from common.waiting import wait_until
from deploy.local_stack import broker_ready
from deploy.topics import create_project_topics, project_topics


PROG = "python -m deploy.create_topics"


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=positive_float, default=120.0,
                        help="seconds to wait for the broker (default %(default)s)")
    args = parser.parse_args(argv)
    settings = get_settings()
    try:
        wait_until(lambda: broker_ready(settings), args.timeout,
                   f"the Kafka broker at {settings.kafka_bootstrap}", interval=1.0)
    except TimeoutError as error:
        return fail(PROG, str(error), 1)
    created = set(create_project_topics(settings))
    for spec in project_topics(settings):
        state = "created" if spec.name in created else "exists "
        print(f"{state} {spec.name:22s} partitions={spec.partitions} "
              f"replication={settings.replication_factor}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main, PROG))
