"""The texts a user reads say one thing about each fact: the README, the add-on's
DOCS.md, the command-line help and the voice studio's page and messages."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from wyoming_pocket_tts.commands import export_voice
from wyoming_pocket_tts.engine.model.audio import MAX_PROMPT_SECONDS

REPO = Path(__file__).resolve().parent.parent
STUDIO = REPO / "wyoming_pocket_tts" / "studio"


def _help(configure) -> str:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.format_help()


def test_every_text_gives_one_recording_length_for_cloning():
    texts = {
        "README.md": (REPO / "README.md").read_text(),
        "DOCS.md": (REPO / "DOCS.md").read_text(),
        "export-voice --help": _help(export_voice.configure),
        "studio page": (STUDIO / "static" / "index.html").read_text(),
        "studio recorder": (STUDIO / "static" / "studio.js").read_text(),
        "studio upload message": (STUDIO / "uploads.py").read_text(),
    }
    said: dict[tuple[int, int], list[str]] = {}
    for source, text in texts.items():
        flowing = " ".join(text.split())  # a range may be broken across lines
        for found in re.finditer(r"\b(\d+) to (\d+) (?:s|seconds)\b", flowing):
            said.setdefault((int(found[1]), int(found[2])), []).append(source)
    assert len(said) == 1, said
    ((shortest, longest), sources) = next(iter(said.items()))
    assert set(sources) == set(texts), f"{set(texts) - set(sources)} give no length"
    assert shortest < longest == MAX_PROMPT_SECONDS  # what the model listens to
