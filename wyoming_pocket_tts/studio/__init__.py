"""The voice studio: a web page and HTTP API to hear, add and manage voices.

Started beside the Wyoming server when --http-uri is given; its web server (aiohttp)
is imported only then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .options import add_arguments

__all__ = ["add_arguments", "serving"]


@asynccontextmanager
async def serving(args: Any, **parts: Any) -> AsyncIterator[None]:
    """Serve the studio for the duration of the block, if --http-uri asks for it;
    `parts` are what `app.serve_studio` needs of the running server."""
    if args.http_uri is None:
        yield
        return
    from .app import serve_studio

    async with serve_studio(args, **parts):
        yield
