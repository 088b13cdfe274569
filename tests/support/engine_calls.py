"""Recording the engine's calls from the worker's threads: which thread ran them, on
how many cores."""

from __future__ import annotations

import threading

import torch


def record_threads_of_steps(model, monkeypatch) -> list[tuple[bool, int]]:
    """Each FlowLM step from now on: (whether it fed a text prompt, torch's thread count)."""
    seen = []
    step = model.flow_lm.step

    def recording_step(latents, caches, prefix=None):
        seen.append((prefix is not None, torch.get_num_threads()))
        return step(latents, caches, prefix)

    monkeypatch.setattr(model.flow_lm, "step", recording_step)
    return seen


def record_decodes(synthesizer, monkeypatch) -> list[tuple[str, int, int]]:
    """Each Mimi call from now on: (thread name, torch's thread count, frames)."""
    seen = []
    start_decoding = synthesizer.start_decoding

    def recording_decode(frames, tail_layers=0):
        seen.append((threading.current_thread().name, torch.get_num_threads(), len(frames)))
        return start_decoding(frames, tail_layers)

    monkeypatch.setattr(synthesizer, "start_decoding", recording_decode)
    return seen
