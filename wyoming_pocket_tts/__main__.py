"""Command line: `wyoming-pocket-tts [SUBCOMMAND] ...`.

With no subcommand (or with options only) the Wyoming server starts, as
wyoming-piper does; the other jobs are subcommands, each in its own module under
`commands/` exposing `HELP`, `configure(parser)` and `main(args) -> int`. Those
modules import nothing that loads torch: a command that runs the model sets the
process up first in its `main` (`engine.cpu.process.prepare_process`), then loads.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "synthesize": "wyoming_pocket_tts.commands.synthesize",
    "export-voice": "wyoming_pocket_tts.commands.export_voice",
    "download": "wyoming_pocket_tts.commands.download",
    "list-models": "wyoming_pocket_tts.commands.list_models",
    "list-voices": "wyoming_pocket_tts.commands.list_voices",
    "health-check": "wyoming_pocket_tts.commands.health_check",
    "normalize": "wyoming_pocket_tts.commands.normalize",
}
SERVER = "wyoming_pocket_tts.commands.serve"


def _run_command(module_name: str, prog: str, argv: list[str]) -> int:
    command = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=command.HELP)
    command.configure(parser)
    return command.main(parser.parse_args(argv))


def run(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        return _run_command(SUBCOMMANDS[argv[0]], f"wyoming-pocket-tts {argv[0]}", argv[1:])
    if argv and argv[0] in ("help", "commands"):
        print("Subcommands (the server runs when none is given):")
        for name, module_name in SUBCOMMANDS.items():
            print(f"  {name:14} {importlib.import_module(module_name).HELP}")
        return 0
    return _run_command(SERVER, "wyoming-pocket-tts", argv)


if __name__ == "__main__":
    sys.exit(run())
