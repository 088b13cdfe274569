"""What a second and a third language cost one server.

Starts the server with English (the default), French and German models at real size
(random weights, as every benchmark here), one voice each, and measures over the
Wyoming protocol:

* resident memory (Linux `VmRSS`) with one, two and three models loaded;
* the first request in a language whose model is not loaded yet: model load plus
  first audio, against the same request once loaded;
* the default language's first audio (short answer) and speed (paragraph) alone, and
  while the two other languages each speak a paragraph at the same time.

Usage: python benchmarks/languages.py [--runs N] [--weights bfloat16|float32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checkpoints import WEIGHT_DTYPES
from benchmarks.engine import PARAGRAPH, SHORT, _machine
from benchmarks.local_server import LocalServer
from benchmarks.server import Timing

MODELS = {"en": "english_2026-10", "fr": "french", "de": "german"}
SHORTS = {
    "en": SHORT,
    "fr": "C'est fait, la lumière de la cuisine est allumée.",
    "de": "Erledigt, das Licht in der Küche ist an.",
}


async def speak(port: int, text: str, voice: str) -> Timing:
    """One Synthesize with `voice` on a fresh connection, read to its AudioStop."""
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import Synthesize, SynthesizeVoice

    async with AsyncTcpClient("127.0.0.1", port) as client:
        started = time.perf_counter()
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        first, audio_bytes = None, 0
        while (event := await client.read_event()) is not None:
            if Error.is_type(event.type):
                raise SystemExit(f"the server answered an error: {Error.from_event(event).text}")
            if AudioChunk.is_type(event.type):
                first = first or time.perf_counter() - started
                audio_bytes += len(event.payload or b"")
            elif AudioStop.is_type(event.type):
                assert first is not None
                return Timing(first, audio_bytes / 48000, time.perf_counter() - started)
    raise SystemExit("the server closed the connection before the end of the answer")


def resident_mb(server: LocalServer) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmRSS")


def build(weights: str, cache: Path) -> tuple[dict[str, Path], Path]:
    """The three models' configs (built once, cached) and a voices folder."""
    import torch

    from tests.support.reference_model import build_model
    from tests.support.voices_audio import write_voice_wav

    configs = {
        code: build_model(
            cache / (name if weights == "float32" else f"{name}-{weights}"), base=name,
            tokenizer_dir=cache / "tokenizers", weights_dtype=getattr(torch, weights),
        ).config_path
        for code, name in MODELS.items()
    }
    voices = cache / "languages-voices"
    for code in MODELS:
        folder = voices if code == "en" else voices / code
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "voice.wav").exists():
            write_voice_wav(folder / "voice.wav")
    return configs, voices


VOICES = {"en": "voice", "fr": "voice-fr", "de": "voice-de"}


async def one_round(configs: dict[str, Path], voices: Path, log: Path) -> dict[str, float]:
    arguments = [
        *(arg for code, config in configs.items() for arg in ("--model", f"{code}={config}")),
        "--voices-dir", str(voices), "--max-loaded-models", "3",
    ]  # fmt: skip
    server = LocalServer(arguments, log)
    try:
        await server.wait_ready()
        port = server.port
        figures: dict[str, float] = {}
        await speak(port, SHORTS["en"], VOICES["en"])  # each voice is encoded once, then cached
        figures["rss 1 model"] = resident_mb(server)
        for count, code in enumerate(("fr", "de"), start=2):
            cold = await speak(port, SHORTS[code], VOICES[code])
            warm = await speak(port, SHORTS[code], VOICES[code])
            figures[f"{code} first request, load + first audio s"] = cold.first_audio_s
            figures[f"{code} once loaded, first audio s"] = warm.first_audio_s
            figures[f"rss {count} models"] = resident_mb(server)
        alone_short = await speak(port, SHORTS["en"], VOICES["en"])
        alone_long = await speak(port, PARAGRAPH, VOICES["en"])
        others = [asyncio.create_task(speak(port, PARAGRAPH, VOICES[c])) for c in ("fr", "de")]
        await asyncio.sleep(2.0)
        busy_short = await speak(port, SHORTS["en"], VOICES["en"])
        busy_long = await speak(port, PARAGRAPH, VOICES["en"])
        await asyncio.gather(*others)
        figures["en alone, first audio s"] = alone_short.first_audio_s
        figures["en alone, speed x"] = alone_long.speed
        figures["en beside fr+de, first audio s"] = busy_short.first_audio_s
        figures["en beside fr+de, speed x"] = busy_long.speed
        return figures
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--weights", choices=WEIGHT_DTYPES, default="bfloat16")
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "wyoming-pocket-tts-bench"
    )
    args = parser.parse_args()
    configs, voices = build(args.weights, args.cache)
    rounds = [
        asyncio.run(one_round(configs, voices, args.cache / f"languages-server-{index}.log"))
        for index in range(args.runs)
    ]
    print(f"{_machine()}; {args.weights} weights; median of {args.runs} round(s)")
    print("| figure | value |\n| --- | --- |")
    for name in rounds[0]:
        value = statistics.median(figures[name] for figures in rounds)
        shown = f"{value:.0f} MB" if name.startswith("rss") else (
            f"{value * 1000:.0f} ms" if name.endswith(" s") else f"{value:.2f}x"
        )
        print(f"| {name.removesuffix(' s').removesuffix(' x')} | {shown} |")


if __name__ == "__main__":
    main()
