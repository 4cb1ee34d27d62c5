"""Cross-site requests can change nothing.

Every request that changes something is a POST, and a POST is refused unless the browser says
it came from this origin: ``Origin`` equal to the request's own scheme and host, or, where a
browser sends no ``Origin``, ``Sec-Fetch-Site: same-origin``. A form on another site, a
script's ``fetch`` to another origin and a request with neither header (not a browser, or a
very old one) are refused the same way, before anything is read or written. Reads are GETs
and change nothing, so they need no check.
"""

from __future__ import annotations

from fastapi import Request

from threadline.errors import Forbidden


def same_origin(request: Request) -> None:
    """A FastAPI dependency for every POST route of the inspector."""
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
    if origin is not None:
        if origin == own:
            return
        raise Forbidden(f"a request from {origin} may not change anything here",
                        hint="use the inspector's own pages")
    if request.headers.get("sec-fetch-site") == "same-origin":
        return
    raise Forbidden("a request that does not say where it came from may not change anything here",
                    hint="use the inspector's own pages in a browser, or the API with a token")
