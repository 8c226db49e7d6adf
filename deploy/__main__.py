"""``python -m deploy up|down|status|settings|wipe``: manage the embedded local stack (``browser``: Chromium
for the tests);
``cluster-up|cluster-down|cluster-status|cluster-env|cluster-submit|cluster-wipe``: the local cluster
(docs/cluster.md)."""

from __future__ import annotations

import shlex
import sys

from common.cli_errors import ArgumentParser, fail, run_command
from common.settings import get_settings
from deploy import browser, cluster, local_stack

PROG = "python -m deploy"


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="fetch what is missing, start Kafka and Redis, create the topics")
    up.add_argument("--secure", action="store_true",
                    help="the broker's client listener speaks SASL_SSL (SCRAM-SHA-512 users and a CA generated "
                         "at first start, ACLs per component; each user's client settings are written to "
                         "<run_dir>/kafka/security/<user>.env); "
                         "implied when FRAUD_KAFKA_SECURITY_PROTOCOL=SASL_SSL")
    up.add_argument("--no-prometheus", action="store_true",
                    help="do not start Prometheus (by default it is started when installed or installable from "
                         "Debian's packages, scraping the services' /metrics; docs/metrics.md)")
    sub.add_parser("down", help="stop Kafka, Redis and Prometheus")
    sub.add_parser("status", help="show what is running")
    sub.add_parser("wipe", help="stop the stack and delete its data (keeps downloads)")
    sub.add_parser("fetch", help="download the broker and the Spark connector jars, build the job's jar (spark_job/jvm)")
    sub.add_parser("settings", help="list every setting with its environment variable")
    sub.add_parser("browser", help="install Debian's chromium for the dashboard's browser checks, if missing (root)")
    sub.add_parser("cluster-up", help="start the local cluster: Redis, three KRaft brokers (topics with replication 3, "
                                      "min.insync.replicas 2), a Spark standalone master and two workers; builds the "
                                      "executors' Python environment first, once (docs/cluster.md)")
    sub.add_parser("cluster-down", help="stop everything cluster-up started")
    sub.add_parser("cluster-status", help="show the cluster's brokers and Spark workers")
    sub.add_parser("cluster-wipe", help="stop the cluster and delete FRAUD_CLUSTER_DIR")
    sub.add_parser("cluster-env", help="print the export line that points every command at the cluster "
                                       "(eval \"$(python -m deploy cluster-env)\")")
    submit = sub.add_parser("cluster-submit", help="spark-submit the detector job to the cluster's master: the "
                                                   "project's code as a zip, the connector jars, this Python")
    submit.add_argument("job_args", nargs="*", metavar="ARG",
                        help="arguments of python -m detectors run (detector names, --groups ...); put -- first")
    args = parser.parse_args(argv)
    settings = get_settings()
    try:
        if args.command == "up":
            local_stack.up(settings, secure=args.secure or settings.kafka_security_protocol == "SASL_SSL",
                           prometheus=not args.no_prometheus)
        elif args.command == "down":
            local_stack.down(settings)
        elif args.command == "wipe":
            local_stack.wipe(settings)
        elif args.command == "fetch":
            local_stack.ensure_java()
            local_stack.fetch_kafka(settings)
            local_stack.fetch_spark_jars(settings)
        elif args.command == "status":
            for name, info in local_stack.status(settings).items():
                state = "ready" if info["ready"] else "down"
                pid = f" pid {info['pid']}" if info.get("pid") else ""
                print(f"{name:18s} {state:6s} {info['address']}{pid}")
        elif args.command == "cluster-up":
            cluster.up(settings)
        elif args.command == "cluster-down":
            cluster.down(settings)
        elif args.command == "cluster-wipe":
            cluster.wipe(settings)
        elif args.command == "cluster-status":
            for name, info in cluster.status(settings).items():
                print(f"{name:18s} {'ready' if info['ready'] else 'down':6s} {info['address']}")
        elif args.command == "cluster-env":
            print("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in cluster.cluster_env(settings).items()))
        elif args.command == "cluster-submit":
            cluster.submit(settings, args.job_args)
        elif args.command == "browser":
            browser.ensure_chromium()
        elif args.command == "settings":
            why = f"FRAUD_PROFILE={settings.profile}" if settings.profile else f"from the master {settings.spark_master}"
            print(f"profile in force: {settings.active_profile} ({why})")
            for env, value, _name in settings.describe():
                print(f"{env:40s} {value}")
    except local_stack.StackError as error:
        return fail(PROG, str(error), 1)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main, PROG))
