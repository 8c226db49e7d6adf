"""Fixtures of the integration tests that need more than the local stack."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def model_registry(tmp_path_factory):
    """A model registry holding one tiny model trained here (seconds), made the settings' registry
    (``FRAUD_MODEL_REGISTRY``) for the module: ``ml_score`` with its default parameters (``latest``) then
    loads it, so no test depends on a model trained beforehand. Yields the registry folder."""
    from common.settings import get_settings
    from tests.models_for_tests import train_tiny_model

    folder = tmp_path_factory.mktemp("model-registry")
    train_tiny_model(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FRAUD_MODEL_REGISTRY", str(folder))
        get_settings.cache_clear()
        try:
            yield folder
        finally:
            get_settings.cache_clear()


@pytest.fixture(scope="session")
def redis_sync(stack):
    """A synchronous Redis client of the local stack (decoded strings)."""
    from common.redis_clients import redis_client

    client = redis_client(stack, decode_responses=True)
    yield client
    client.close()
