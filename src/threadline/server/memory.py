"""What is remembered about a user, over HTTP: list, read, delete one entry, forget all. A user
token reaches only its own user's memory (``server/access.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import Response

from threadline.engine import Engine
from threadline.memory import MemoryStore
from threadline.server.access import CallerDep


def add_memory_routes(app: FastAPI, engine: Engine) -> None:
    if engine.store.memory is None:
        return  # a store that keeps no memory has nothing to serve here
    memory = MemoryStore(engine.store, clock=engine.clock)

    @app.get("/v1/users/{user_id}/memory")
    def list_memory(user_id: str, caller: CallerDep,
                    everything: bool = Query(default=False, alias="all")
                    ) -> list[dict[str, Any]]:
        """The user's current entries (``?all=true``: with their history)."""
        caller.acting_for(user_id, "user")
        return [e.to_json() for e in memory.entries(user_id, history=everything)]

    @app.get("/v1/users/{user_id}/memory/{entry_id}")
    def get_memory(user_id: str, entry_id: str, caller: CallerDep) -> dict[str, Any]:
        caller.acting_for(user_id, "user")
        return memory.get(user_id, entry_id).to_json()

    @app.delete("/v1/users/{user_id}/memory/{entry_id}", status_code=204)
    def delete_memory(user_id: str, entry_id: str, caller: CallerDep) -> Response:
        caller.acting_for(user_id, "user")
        memory.delete(user_id, entry_id)
        return Response(status_code=204)

    @app.delete("/v1/users/{user_id}/memory")
    def forget_user(user_id: str, caller: CallerDep) -> dict[str, Any]:
        """Delete everything remembered about the user."""
        caller.acting_for(user_id, "user")
        return {"user_id": user_id, "deleted": memory.forget(user_id)}
