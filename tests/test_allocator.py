"""A float32 model makes the C allocator keep one heap for all threads and large blocks
in mappings of their own, and the process set-up has PyTorch put large tensors in 2 MB
pages and MKL free its buffers (see engine/cpu/allocator.py and engine/cpu/process.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wyoming_pocket_tts.engine.cpu.allocator import HUGE_PAGES_VARIABLE, MKL_BUFFERS_VARIABLE

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="arenas are glibc's",
)
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# glibc's own report of its heaps (XML), for the scripts below.
MALLOC_INFO = textwrap.dedent(
    """
    import ctypes, tempfile

    def malloc_info():
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
        libc.fclose.argtypes = (ctypes.c_void_p,)
        with tempfile.NamedTemporaryFile(suffix=".xml") as report:
            stream = libc.fopen(report.name.encode(), b"w")
            libc.malloc_info(0, stream)
            libc.fclose(stream)
            return open(report.name).read()
    """
)

# Threads that allocate, then glibc's report of its heaps: one <heap> per arena.
COUNT_HEAPS = MALLOC_INFO + textwrap.dedent(
    """
    import os, threading
    import torch
    from wyoming_pocket_tts.engine.cpu import allocator
    if os.environ.get("FLOAT32"):
        allocator.choose_heap(quantized=os.environ["FLOAT32"] == "0")

    def allocate():
        for size in range(1, 200):
            torch.empty(size * 1024).fill_(1.0)

    threads = [threading.Thread(target=allocate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(malloc_info().count("<heap nr="))
    """
)


def _heaps(**environment: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | environment
    done = subprocess.run(
        [sys.executable, "-c", COUNT_HEAPS], capture_output=True, text=True, env=env, check=True
    )
    return int(done.stdout.strip().splitlines()[-1])


@glibc_only
def test_threads_of_a_float32_process_share_one_heap():
    assert _heaps(FLOAT32="1") == 1


@glibc_only
def test_threads_of_an_int8_process_have_a_heap_per_core():
    """int8 FlowLM's products allocate on their threads at the same moment: one heap
    each for as many as run at once, not glibc's eight per core (four threads here)."""
    cores = len(os.sched_getaffinity(0))
    heaps = _heaps(FLOAT32="0")
    assert heaps <= cores and (heaps > 1 or cores == 1)
    assert _heaps() > 1  # importing the engine chooses nothing


@glibc_only
def test_an_arena_limit_set_by_the_user_is_kept():
    assert _heaps(FLOAT32="1", MALLOC_ARENA_MAX="8") > 1


@pytest.mark.parametrize("quantize", [False, True])
def test_the_server_sets_up_its_process_before_it_loads(monkeypatch, quantize):
    from wyoming_pocket_tts import resolve
    from wyoming_pocket_tts.catalog import CatalogError
    from wyoming_pocket_tts.commands import serve

    events = []
    monkeypatch.setattr(
        serve, "prepare_process", lambda quantized, threads: events.append(quantized)
    )

    def resolve_model(options):
        events.append(("resolve", options.quantize))
        raise CatalogError("stop here")

    monkeypatch.setattr(resolve, "resolve_model", resolve_model)
    parser = serve.argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args(["--quantize"] if quantize else [])
    assert serve.main(args) == 1
    assert events == [quantize, ("resolve", quantize)]


# How many kB of this process's anonymous memory the kernel backs with huge pages.
ANONYMOUS_HUGE_KB = textwrap.dedent(
    """
    def anonymous_huge_kb():
        with open("/proc/self/smaps_rollup") as rollup:
            line = next(line for line in rollup if line.startswith("AnonHugePages:"))
        return int(line.split()[1])
    """
)

# A process set up as the server's (its command module imported, then the set-up), then
# a 64 MB tensor: how many kB of it the kernel backs with huge pages.
HUGE_PAGES_OF_A_TENSOR = ANONYMOUS_HUGE_KB + textwrap.dedent(
    """
    import wyoming_pocket_tts.commands.serve
    from wyoming_pocket_tts.engine.cpu.process import prepare_process
    prepare_process(quantized=False)
    import torch

    before = anonymous_huge_kb()
    weights = torch.empty(16 * 1024 * 1024)
    weights.fill_(1.0)
    print(anonymous_huge_kb() - before)
    """
)


def _huge_kb(**environment: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != HUGE_PAGES_VARIABLE} | environment
    done = subprocess.run(
        [sys.executable, "-c", HUGE_PAGES_OF_A_TENSOR],
        capture_output=True, text=True, env=env, check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def _thp_mode() -> str | None:
    """The kernel's transparent huge page mode (always, madvise, never), if it has them."""
    try:
        text = THP_MODE.read_text()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")]


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="no transparent huge pages")
def test_large_tensors_of_a_server_process_are_in_huge_pages():
    assert _huge_kb() >= 32 * 1024  # at least half of the 64 MB tensor


@pytest.mark.skipif(
    _thp_mode() != "madvise", reason="only in madvise mode does the kernel wait to be asked"
)
def test_huge_pages_turned_off_by_the_user_stay_off():
    assert _huge_kb(**{HUGE_PAGES_VARIABLE: "0"}) == 0


# A process set up as the server's makes a 64 MB tensor, loads a model (its path in
# argv), then makes another: the kB of huge pages the first has after the load, and the
# kB the second got.
HUGE_PAGES_AROUND_A_LOAD = ANONYMOUS_HUGE_KB + textwrap.dedent(
    """
    import sys
    from wyoming_pocket_tts.engine.cpu.process import prepare_process
    prepare_process(quantized=False)
    import torch
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS

    start = anonymous_huge_kb()
    weights = torch.empty(16 * 1024 * 1024)
    weights.fill_(1.0)
    PocketTTS.load(sys.argv[1])
    kept = anonymous_huge_kb() - start
    buffer = torch.empty(16 * 1024 * 1024)
    buffer.fill_(1.0)
    print(kept, anonymous_huge_kb() - start - kept)
    """
)


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="no transparent huge pages")
def test_after_a_model_is_loaded_only_what_came_before_is_in_huge_pages(tiny_model):
    env = {k: v for k, v in os.environ.items() if k != HUGE_PAGES_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", HUGE_PAGES_AROUND_A_LOAD, str(tiny_model.config_path)],
        capture_output=True, text=True, env=env, check=True,
    )
    kept, later = map(int, done.stdout.split())
    assert kept >= 32 * 1024  # the tensor made before the load keeps its huge pages
    assert later == 0  # one made after it (a request's buffer, in a server) gets none


# Attention (MKL's products inside) in a process that imports `FIRST`, then sets itself
# up as the server does, then the bytes MKL's memory manager holds, read from MKL
# itself; "no MKL" where this PyTorch has none (aarch64 builds).
MKL_HELD_BYTES = textwrap.dedent(
    """
    import ctypes, importlib, logging, os
    logging.basicConfig()
    importlib.import_module(os.environ["FIRST"])
    from wyoming_pocket_tts.engine.cpu.process import prepare_process
    prepare_process(quantized=False)
    import torch
    from torch.nn import functional as F

    library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    try:
        held = library.mkl_serv_mem_stat
    except AttributeError:
        print("no MKL")
        raise SystemExit
    held.restype = ctypes.c_longlong
    queries = torch.randn(1, 16, 200, 64)
    F.scaled_dot_product_attention(queries, queries, queries)
    print(held(ctypes.byref(ctypes.c_int())))
    """
)


def _mkl_held(first_import: str) -> tuple[str, str]:
    """What MKL holds after attention, and the process's log."""
    env = {k: v for k, v in os.environ.items() if k != MKL_BUFFERS_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", MKL_HELD_BYTES],
        capture_output=True, text=True, env=env | {"FIRST": first_import}, check=True,
    )
    return done.stdout.strip().splitlines()[-1], done.stderr


def test_mkl_keeps_no_buffers_in_a_process_set_up_before_torch():
    held, log = _mkl_held("wyoming_pocket_tts.commands.serve")
    if held == "no MKL":
        pytest.skip("this PyTorch has no MKL")
    assert int(held) == 0
    assert "torch was imported before" not in log


def test_a_set_up_after_torch_says_that_mkl_keeps_its_buffers():
    held, log = _mkl_held("torch")
    assert "torch was imported before the process set-up" in log
    if held != "no MKL":
        assert int(held) > 0  # the probe sees buffers where MKL keeps them


def test_an_mkl_buffer_setting_of_the_user_is_kept():
    script = (
        "import os; from wyoming_pocket_tts.engine.cpu.process import prepare_process\n"
        f"prepare_process(quantized=False); print(os.environ['{MKL_BUFFERS_VARIABLE}'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env=os.environ | {MKL_BUFFERS_VARIABLE: "0"},
    )
    assert done.stdout.strip() == "0"


# A process set up as a server's (float32 unless QUANTIZED) frees a 16 MB tensor, then
# makes a 12 MB one: whether glibc gave that one a mapping of its own (by its own count).
NEW_BUFFER_MAPPED = MALLOC_INFO + textwrap.dedent(
    """
    import os, re
    from wyoming_pocket_tts.engine.cpu.process import prepare_process
    prepare_process(quantized="QUANTIZED" in os.environ)
    import torch

    def mapped_blocks():
        return int(re.search('<total type="mmap" count="(\\d+)"', malloc_info())[1])

    torch.empty(4 * 1024 * 1024).fill_(1.0)  # 16 MB, freed: glibc's own threshold rises to it
    before = mapped_blocks()
    buffer = torch.empty(3 * 1024 * 1024).fill_(1.0)  # 12 MB
    print(mapped_blocks() - before)
    """
)


def _new_buffer_mapped(**environment: str) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"} | environment
    done = subprocess.run(
        [sys.executable, "-c", NEW_BUFFER_MAPPED], capture_output=True, text=True, env=env,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1] == "1"


@glibc_only
def test_large_buffers_keep_mappings_of_their_own_after_larger_ones_were_freed():
    """Else they would come from the heap, where requests of different lengths leave holes."""
    assert _new_buffer_mapped()


@glibc_only
def test_an_int8_process_keeps_glibcs_own_mapping_threshold():
    assert not _new_buffer_mapped(QUANTIZED="1")


@glibc_only
def test_a_mapping_threshold_set_by_the_user_is_kept():
    assert not _new_buffer_mapped(MALLOC_MMAP_THRESHOLD_=str(64 * 1024 * 1024))
