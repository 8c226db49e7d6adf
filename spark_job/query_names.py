"""Every name a query of the detector job has. A name is also the query's checkpoint folder and its
exactly-once writer's id, so a restarted job finds both: change one and that query starts afresh."""

from __future__ import annotations

DLQ = "dlq"                          # the dead letters alone (``--query-per-detector``)
SHARED = "detectors-shared"          # every detector in one query (``--shared``)
REHEARSAL_PREFIX = "warmup-"         # the rehearsal's copies (spark_job.tuning.rehearsal): never the job's own


def group(group_name: str, chosen: tuple[str, ...] | None = None) -> str:
    """A group's query; part of a group (another application may run the rest) is named by its members."""
    return f"detectors-{group_name}" if chosen is None else "-".join((f"detectors-{group_name}", *chosen))


def alone(detector: str) -> str:
    """A detector in no group."""
    return f"detector-{detector}"


def quarantined(detector: str) -> str:
    """A detector set apart from its group's query after its code failed there (spark_job.quarantine)."""
    return f"quarantined-{detector}"


def rehearsal(name: str) -> str:
    return REHEARSAL_PREFIX + name


def is_rehearsal(name: str) -> bool:
    return name.startswith(REHEARSAL_PREFIX)
