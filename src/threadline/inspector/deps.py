"""What every inspector route reaches: the engine it was mounted with, its store, and how calls
are priced. ``mount`` leaves one :class:`Inspector` on the app; a route takes it as
``InspectorDep`` (and the caller as ``server.access.CallerDep``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from threadline.cache.pricing import CacheProfile, profile
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.stores.base import Store
from threadline.stores.browse import BrowseBackend


@dataclass(frozen=True)
class Pricing:
    """How the inspector bills a call: as ``threadline cache report`` does by default."""

    profile: CacheProfile = field(default_factory=lambda: profile("anthropic-5m"))
    input_price: float = 3.0  # USD per million input tokens


@dataclass
class Inspector:
    engine: Engine
    pricing: Pricing = field(default_factory=Pricing)

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def browse(self) -> BrowseBackend:
        found = self.store.browse
        if found is None:
            raise InputError("this store cannot be browsed a page at a time",
                             hint="serve a SQLite or PostgreSQL store")
        return found


def inspector_of(request: Request) -> Inspector:
    found = getattr(request.app.state, "inspector", None)
    assert isinstance(found, Inspector), "the inspector's routes need mount(app, engine)"
    return found


InspectorDep = Annotated[Inspector, Depends(inspector_of)]
