"""The Info event: what Home Assistant is told about this server on every Describe.

Rebuilt for every Describe from the voices available at that moment, so a voice file
dropped into --voices-dir shows up in Home Assistant without a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from .. import __version__
from ..resolve import ModelDescription
from ..voices.store import VoiceKind, VoiceSource

PROGRAM_NAME = "pocket-tts"
KYUTAI = Attribution(name="Kyutai", url="https://github.com/kyutai-labs/pocket-tts")


def _voice(source: VoiceSource, languages: Iterable[str]) -> TtsVoice:
    if source.kind is VoiceKind.PREDEFINED:
        attribution = KYUTAI
    else:  # the user's own file: no one to credit but its path
        attribution = Attribution(
            name="custom voice", url=source.path.as_uri() if source.path else ""
        )
    return TtsVoice(
        name=source.name,
        description=source.description,
        attribution=attribution,
        installed=True,
        version=None,
        languages=list(languages),
    )


def build_info(
    model: ModelDescription, voices: Mapping[str, VoiceSource], *, streaming: bool
) -> Info:
    program = TtsProgram(
        name=PROGRAM_NAME,
        description=f"Kyutai Pocket TTS ({model.name}), streaming on CPU",
        attribution=KYUTAI,
        installed=True,
        version=__version__,
        voices=[_voice(voices[name], model.languages) for name in sorted(voices)],
        supports_synthesize_streaming=streaming,
    )
    return Info(tts=[program])
