"""The live dashboard (``python -m services.dashboard``)."""
