"""Importing the package changes nothing in the process; the set-up is an explicit call
(engine/cpu/process.py) that the commands make before torch is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from wyoming_pocket_tts.__main__ import SERVER, SUBCOMMANDS
from wyoming_pocket_tts.engine.cpu.allocator import HUGE_PAGES_VARIABLE, MKL_BUFFERS_VARIABLE
from wyoming_pocket_tts.engine.cpu.process import PRIMITIVE_CACHE_VARIABLES

SET_UP_VARIABLES = (MKL_BUFFERS_VARIABLE, HUGE_PAGES_VARIABLE, *PRIMITIVE_CACHE_VARIABLES)

# Every module of the package imported in a fresh process: what changed in its
# environment, and whether torch came along.
IMPORT_EVERYTHING = textwrap.dedent(
    """
    import importlib, json, os, pkgutil, sys
    before = dict(os.environ)
    import wyoming_pocket_tts
    names = [wyoming_pocket_tts.__name__] + [
        module.name
        for module in pkgutil.walk_packages(wyoming_pocket_tts.__path__, "wyoming_pocket_tts.")
    ]
    for name in names:
        importlib.import_module(name)
    after = dict(os.environ)
    print(json.dumps({
        "modules": len(names),
        "changed": {k: [before.get(k), after.get(k)] for k in before.keys() | after.keys()
                    if before.get(k) != after.get(k)},
    }))
    """
)


def _run(code: str) -> dict:
    """Run `code` in a fresh process whose environment has none of the set-up's variables."""
    env = {k: v for k, v in os.environ.items() if k not in SET_UP_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_module_leaves_the_environment_as_it_was():
    result = _run(IMPORT_EVERYTHING)
    assert result["modules"] > 20  # the walk found the package's modules, not just its root
    assert result["changed"] == {}


def test_the_set_up_changes_the_environment_and_keeps_what_the_user_set():
    code = textwrap.dedent(
        """
        import json, os
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = "7"
        before = dict(os.environ)
        from wyoming_pocket_tts.engine.cpu.process import prepare_process
        prepare_process(quantized=True)
        print(json.dumps({"changed": {k: v for k, v in os.environ.items() if before.get(k) != v},
                          "kept": os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]}))
        """
    )
    result = _run(code)
    assert result["changed"]  # it does set the process up
    assert result["kept"] == "7"


def test_no_command_imports_torch_before_its_main_sets_the_process_up():
    """A command's module and its options come before `prepare_process`, which must
    precede torch (MKL reads its setting as torch loads)."""
    modules = [SERVER, *SUBCOMMANDS.values()]
    code = textwrap.dedent(
        f"""
        import argparse, importlib, json, sys
        imported = {{}}
        for name in {modules!r}:
            command = importlib.import_module(name)
            command.configure(argparse.ArgumentParser())
            imported[name] = "torch" in sys.modules
        print(json.dumps(imported))
        """
    )
    imported = _run(code)
    assert imported == dict.fromkeys(modules, False)
