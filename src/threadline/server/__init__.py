"""The HTTP service: ``threadline serve`` (FastAPI + uvicorn, the ``server`` extra)."""
