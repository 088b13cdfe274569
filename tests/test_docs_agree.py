"""The texts a user reads say one thing about each fact: the README, the add-on's
DOCS.md, the command-line help and the voice studio's page and messages."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from wyoming_pocket_tts.commands import export_voice, serve
from wyoming_pocket_tts.engine.model.audio import MAX_PROMPT_SECONDS

REPO = Path(__file__).resolve().parent.parent
STUDIO = REPO / "wyoming_pocket_tts" / "studio"


def _help(configure) -> str:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.format_help()


def test_every_text_gives_one_recording_length_for_cloning() -> None:
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


def _server_options() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    return {
        option: action
        for action in parser._actions  # argparse offers no public list of its options
        for option in action.option_strings
        if option.startswith("--") and action.help != argparse.SUPPRESS
    }


def test_the_readmes_option_table_gives_the_servers_own_options_and_defaults():
    readme = (REPO / "README.md").read_text()
    table = re.findall(r"^\| `(--[a-z-]+)(?:[^|]|\\\|)*\| (.*) \|$", readme, re.MULTILINE)
    options = _server_options()
    documented = {option for option, _ in table}
    listed_together = {"--debug", "--log-format", "--version", "--help"}  # one row, or argparse's
    assert documented - set(options) == set(), "the README names options the server lacks"
    assert set(options) - documented - listed_together == set(), "options the README leaves out"
    defaults = {
        option: stated[1]
        for option, meaning in table
        if (stated := re.search(r"\(default `?([^`),]+)`?\)$", meaning))
    }
    assert len(defaults) >= 6, defaults  # the pattern still finds the table's defaults
    for option, stated in defaults.items():
        action = options[option]
        if action.default is None:  # filled in later: --help says which
            assert f"default: {stated}" in action.help, option
        elif isinstance(action.default, (int, float)):
            assert action.default == type(action.default)(stated), option
        else:
            assert action.default == stated, option
