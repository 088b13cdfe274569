"""The voice studio's web server: the page, and the HTTP API the page itself uses.

Off unless --http-uri is given; served by the Wyoming server's own process and event
loop, next to it, so both see the same languages, models and voices, the same engine
worker and the same voice-loading thread. The page has no login: in the add-on it is reachable only
through Home Assistant's ingress proxy (--http-allow 172.30.32.2), which does the
authentication; standalone it belongs on a trusted network only. All its URLs are
relative, so it works under the ingress path prefix (the X-Ingress-Path header).
"""

from __future__ import annotations

import argparse
import importlib.resources
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlparse

from aiohttp import web

from .. import __version__
from ..engine.errors import EngineError
from ..engine.model.audio import MAX_PROMPT_SECONDS
from ..engine.runtime.options import GenerationOptions
from ..engine.runtime.worker import SynthesisWorker
from ..engine.tempo import MAX_SPEED, MIN_SPEED
from ..languages import Language, Languages
from ..normalize.spoken import TextOptions
from ..recent import RecentRequests
from ..speakers import LoadedLanguage
from ..voices.names import LanguageVoice
from ..voices.store import UnknownVoiceError
from .library import CLONING_UNAVAILABLE, NAME_PATTERN, NAME_RULE, VoiceLibrary
from .options import Network
from .preview import as_spoken, sample_text, stream_preview
from .served import language_name, loaded_voices, served_voices, voice_files
from .speeds import requested_speed
from .uploads import (
    DECODED_SECONDS,
    MAX_RECORDING_SECONDS,
    MAX_UPLOAD_BYTES,
    MIN_SPEECH_SECONDS,
    RECOMMENDED_SECONDS,
    StudioError,
    can_decode_compressed_audio,
)

_LOGGER = logging.getLogger(__name__)

#: Longest preview text: a few sentences are enough to judge a voice.
MAX_PREVIEW_CHARS = 500
#: On SIGTERM a preview still playing gets this long to end, not aiohttp's minute.
SHUTDOWN_SECONDS = 2.0
#: Room for the multipart framing and the name field around the file.
_FORM_OVERHEAD_BYTES = 64 * 1024
_STATIC = importlib.resources.files(__package__) / "static"
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

# ---------------------------------------------------------------------------
# The application


@dataclass(frozen=True)
class Studio:
    library: VoiceLibrary
    default: LoadedLanguage  # the default language's, always in memory
    worker: SynthesisWorker
    options: GenerationOptions  # as the Wyoming handler uses them
    text: TextOptions  # how the Wyoming handler reads a request's text
    recent: RecentRequests
    allowed: tuple[Network, ...]


def build_app(studio: Studio) -> web.Application:
    app = web.Application(
        client_max_size=MAX_UPLOAD_BYTES + _FORM_OVERHEAD_BYTES,
        middlewares=[_allowed_peers(studio.allowed), _same_site_writes, _errors_as_json],
    )
    api = _Api(studio)
    app.router.add_get("/", _page)
    app.router.add_static("/static", Path(str(_STATIC)), append_version=False)
    app.router.add_get("/api/status", api.status)
    app.router.add_get("/api/voices", api.voices)
    app.router.add_post("/api/voices", api.add)
    app.router.add_patch("/api/voices/{name}", api.change)
    app.router.add_delete("/api/voices/{name}", api.delete)
    app.router.add_get("/api/voices/{name}/preview", api.preview)
    app.router.add_get("/api/voices/{name}/export", api.export)
    return app


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _allowed_peers(allowed: tuple[Network, ...]):
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if allowed:
            try:
                peer = ipaddress.ip_address(request.remote or "")
            except ValueError:
                peer = None
            if peer is None or not any(peer in network for network in allowed):
                _LOGGER.warning("Studio: refused a request from %s", request.remote)
                return _error(403, "Not allowed from this address.")
        return await handler(request)

    return middleware


@web.middleware
async def _same_site_writes(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse changes asked for by another site's page in the user's browser (a form
    posted to this address). Requests through Home Assistant's ingress come with its
    header, which no other site's page can add without the browser asking us first."""
    origin = request.headers.get("Origin")
    if (
        request.method not in _SAFE_METHODS
        and origin
        and "X-Ingress-Path" not in request.headers
        and urlparse(origin).netloc != request.host
    ):
        return _error(403, "Changes are accepted only from the studio's own page.")
    return await handler(request)


@web.middleware
async def _errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except StudioError as error:
        return _error(error.status, str(error))
    except UnknownVoiceError as error:
        return _error(404, str(error))
    except EngineError as error:
        return _error(422, str(error))
    except web.HTTPRequestEntityTooLarge:
        return _too_large()
    except web.HTTPException as error:  # aiohttp's own: no such path, or method
        if error.status < 400:
            raise
        response = _error(error.status, f"{error.reason}: {request.method} {request.path}")
        if "Allow" in error.headers:
            response.headers["Allow"] = error.headers["Allow"]
        return response
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _too_large() -> web.Response:
    return _error(413, f"The upload is over the limit of {MAX_UPLOAD_BYTES >> 20} MB.")


async def _page(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(Path(str(_STATIC / "index.html")))


class _Api:
    def __init__(self, studio: Studio) -> None:
        self._studio = studio
        self._library = studio.library

    async def status(self, request: web.Request) -> web.Response:
        library, default = self._library, self._studio.default
        languages = library.languages
        engine = default.model
        cloning = engine.has_voice_cloning
        served = {voice.local: name for name, voice in served_voices(languages).items()}
        loaded = await loaded_voices(languages)
        return web.json_response({
            "version": __version__,
            "model": {  # the default language's
                "name": default.language.resolved.description.name,
                "languages": list(default.language.resolved.description.languages),
                "quantized": engine.quantized,
                "sample_rate": engine.sample_rate,
            },
            "languages": [
                self._language(languages[code], served) for code in languages.codes
            ],
            "voice_cloning": {
                "available": cloning, "reason": None if cloning else CLONING_UNAVAILABLE
            },
            "voices_folder": None if library.folder is None else str(library.folder),
            "compressed_uploads": can_decode_compressed_audio(),
            "default_voice": self._served_default(default.language, served),
            "loaded_voices": sorted(served[voice] for voice in loaded if voice in served),
            "sentence_silence": self._studio.options.sentence_silence,
            "normalize": self._studio.text.normalize,
            "speed": self._studio.text.speed,  # a voice's, unless it has its own
            # What the server checks, for the page (and any client) to check the same.
            "limits": {
                "upload_bytes": MAX_UPLOAD_BYTES,
                "recording_seconds": MAX_RECORDING_SECONDS,
                "decoded_seconds": DECODED_SECONDS,
                "prompt_seconds": MAX_PROMPT_SECONDS,
                "min_speech_seconds": MIN_SPEECH_SECONDS,
                "recommended_seconds": list(RECOMMENDED_SECONDS),
                "preview_chars": MAX_PREVIEW_CHARS,
                "name_pattern": NAME_PATTERN.pattern,
                "name_rule": NAME_RULE,
                "speed": [MIN_SPEED, MAX_SPEED],
            },
            "recent_requests": [
                record.as_json() for record in self._studio.recent.newest_first()
            ],
        })

    def _language(self, language: Language, served: dict[LanguageVoice, str]) -> dict:
        library = self._library
        folder = library.folder_of(language.code)
        return {
            "code": language.code,
            "name": language_name(language.code),
            "model": language.resolved.description.name,
            "default": language.code == library.languages.default.code,
            "loaded": language.code in library.languages.loaded,
            "default_voice": self._served_default(language, served),
            "voices_folder": None if folder is None else str(folder),
            "sample_text": sample_text(language.code),
        }

    @staticmethod
    def _served_default(language: Language, served: dict[LanguageVoice, str]) -> str:
        voice = LanguageVoice(language.code, language.default_voice)
        return served.get(voice, language.default_voice)

    async def voices(self, request: web.Request) -> web.Response:
        return web.json_response(await self._library.listing())

    async def add(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            raise StudioError("Send a multipart form with a `file` (and a `name`).", 415)
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            raise StudioError("The form has no `file`.", 400)
        name, language = form.get("name"), form.get("language")
        if name is not None and not isinstance(name, str):
            raise StudioError("`name` must be text.", 400)
        if language is not None and not isinstance(language, str):
            raise StudioError("`language` must be text.", 400)
        data = upload.file.read()
        if not data:
            raise StudioError("The file is empty.", 400)
        if len(data) > MAX_UPLOAD_BYTES:  # aiohttp's limit is the whole form's, a bit more
            return _too_large()
        voice = await self._library.add(
            name.strip() if name else None, upload.filename, data,
            language.strip() if language else None,
        )
        return web.json_response(voice, status=201)

    async def change(self, request: web.Request) -> web.Response:
        """Rename a voice (`name`), set its own speaking rate (`speed`), or both: the
        body is checked whole before anything changes."""
        usage = 'Send JSON: {"name": "new name"} to rename, {"speed": 1.25} or {"speed": null}.'
        try:
            body = await request.json()
        except ValueError:
            raise StudioError(usage, 400) from None
        if not isinstance(body, dict) or not body or body.keys() - {"name", "speed"}:
            raise StudioError(usage, 400)
        if "name" in body and not isinstance(body["name"], str):
            raise StudioError(usage, 400)
        speed = requested_speed(body.get("speed"))
        name = request.match_info["name"]
        if "name" in body:
            renamed = await self._library.rename(name, body["name"])
            if "speed" not in body:
                return web.json_response(renamed)
            name = renamed["name"]
        return web.json_response(await self._library.set_speed(name, speed))

    async def delete(self, request: web.Request) -> web.Response:
        await self._library.delete(request.match_info["name"])
        return web.Response(status=204)

    async def preview(self, request: web.Request) -> web.StreamResponse:
        library = self._library
        voice = library.lookup(request.match_info["name"])
        text = request.query.get("text", sample_text(voice.language))
        if not text.strip():
            raise StudioError("The preview text is empty.", 400)
        if len(text) > MAX_PREVIEW_CHARS:
            raise StudioError(f"The preview text is over {MAX_PREVIEW_CHARS} characters.", 400)
        speech = as_spoken(text, voice.language, self._studio.text, library.speed_of(voice))
        async with library.languages.use(voice.language) as language:
            return await stream_preview(
                request, language=language, voice=voice, worker=self._studio.worker,
                options=self._studio.options, recent=self._studio.recent, speech=speech,
            )

    async def export(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        data = await self._library.export(name)
        return web.Response(
            body=data,
            content_type="application/octet-stream",
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}.safetensors"
            },
        )


# ---------------------------------------------------------------------------
# Serving


@asynccontextmanager
async def serve_studio(
    args: argparse.Namespace, *, languages: Languages[LoadedLanguage], worker: SynthesisWorker,
    options: GenerationOptions, text: TextOptions, recent: RecentRequests, executor: Executor,
) -> AsyncIterator[None]:
    """Serve the studio on --http-uri for the duration of the block."""
    async with languages.use(languages.default.code) as default:
        library = VoiceLibrary(
            languages=languages, folder=args.voices_dir.resolve() if args.voices_dir else None,
            caches=voice_files(default), executor=executor,
        )
        studio = Studio(
            library, default, worker, options, text, recent, tuple(args.http_allow)
        )
        runner = web.AppRunner(
            build_app(studio), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS
        )
        await runner.setup()
        host, port = args.http_uri
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as error:
            await runner.cleanup()
            _LOGGER.error("Cannot serve the studio on %s:%d: %s", host, port, error.strerror)
            raise SystemExit(1) from None
        _LOGGER.info("Studio: serving on http://%s:%d/", host, port)
        try:
            yield
        finally:
            await runner.cleanup()
