"""The project's topics (``common.topics``), created idempotently."""

from __future__ import annotations

from common.kafka_admin import create_topics
from common.settings import Settings
from common.topics import project_topics

__all__ = ["create_project_topics", "project_topics"]


def create_project_topics(settings: Settings) -> list[str]:
    return create_topics(settings, project_topics(settings))
