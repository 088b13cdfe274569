"""The Info event: what Home Assistant is told about this server on every Describe.

Rebuilt for every Describe from the voices available at that moment, so a voice file
dropped into --voices-dir shows up in Home Assistant without a restart. Each voice is
listed under the one language that speaks it: Home Assistant groups voices by
language and sends back only the name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from .. import __version__
from ..resolve import ModelDescription
from ..voices.names import LanguageVoice
from ..voices.store import VoiceKind, VoiceSource

PROGRAM_NAME = "pocket-tts"
KYUTAI = Attribution(name="Kyutai", url="https://github.com/kyutai-labs/pocket-tts")


def _voice(name: str, source: VoiceSource, language: str) -> TtsVoice:
    if source.kind is VoiceKind.PREDEFINED:
        attribution = KYUTAI
    else:  # the user's own file: no one to credit but its path
        attribution = Attribution(
            name="custom voice", url=source.path.as_uri() if source.path else ""
        )
    return TtsVoice(
        name=name,
        description=source.description,
        attribution=attribution,
        installed=True,
        version=None,
        languages=[language],
    )


def build_info(
    models: Sequence[ModelDescription],
    voices: Mapping[str, tuple[LanguageVoice, VoiceSource]],
    *,
    streaming: bool,
) -> Info:
    """`models` in order, the default first; `voices` by the name each is served under."""
    program = TtsProgram(
        name=PROGRAM_NAME,
        description=f"Kyutai Pocket TTS ({', '.join(model.name for model in models)}), "
        "streaming on CPU",
        attribution=KYUTAI,
        installed=True,
        version=__version__,
        voices=[
            _voice(name, voices[name][1], voices[name][0].language) for name in sorted(voices)
        ],
        supports_synthesize_streaming=streaming,
    )
    return Info(tts=[program])
