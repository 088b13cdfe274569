"""The batching policy: when the worker steps, decodes and waits, and its defaults."""

from __future__ import annotations

import torch

# Frames of one job per Mimi call: four cost 35% less per frame than one, and a new
# request's first frame waits at most one such call (about 50 ms, standard model).
DECODE_FRAMES_PER_JOB = 4
# Taking turns, a job's frames wait to be decoded in runs of TURN_RUN_FRAMES while its
# listener has at least MIN_LEAD_SECONDS of audio in hand (one call takes every job's
# run). A run and a FlowLM step take about 0.1 s on two cores, so the listener never
# runs dry. Runs of eight against four: 2.42x against 2.33x real time (alternating in
# one process, eight ahead in six rounds of six).
TURN_RUN_FRAMES = 8
# With int8 FlowLM a job alone waits for longer runs, since a Mimi call costs less per
# frame the more frames it takes: sixteen against eight, alternating in one process
# (Intel Xeon, six rounds), 6.59x against 6.46x real time, ahead in every round (24:
# 6.49x against 6.38x for 16, four rounds). A request that comes meanwhile may wait
# for the longer call: first audio beside one int8 paragraph after 32 against 28 ms
# (medians of eight rounds; 52 against 35 at worst). Not in float32 (3.62x against
# 3.54x there): a call of sixteen frames holds some 20 MB more at its peak, which
# float32's memory, at 0.60x the reference's, cannot spare; int8's is at 0.43x.
INT8_TURN_CALL_FRAMES = 16
MIN_LEAD_SECONDS = 0.3
# Side by side, the decoder thread stops its Mimi calls before the decoder's last
# layers (the last ELU and the output convolution, over the 24 kHz activations) and
# the generator thread runs them between its steps: with several streams Mimi's
# thread is the bound and FlowLM's has time to spare. Four paragraphs at once, in
# one process against the decoder thread doing it all (Zen 5 EPYC, 2 cores, four
# rounds): 20.28x against 19.85x real time together (median), ahead in three rounds
# (a first form, 20.84x against 20.02x, ahead in all four); with the last residual
# unit too, 19.61x against 19.32x (two rounds); from the last SEANet stage on, 18.31x
# against 20.08x (the generator became the bound). One stream takes turns: unchanged.
GENERATOR_TAIL_LAYERS = 2
# The stages take turns while this many jobs or fewer are active (float32). Against
# side by side, alternating in one process (Intel Xeon, 2 cores, paragraphs at
# once, four rounds each): two jobs 4.55x against 3.61x real time together (ahead
# in four rounds of four), three 5.65x against 5.23x (three of four), their first
# audio no later for a request that comes meanwhile; four 6.9-7.7x against
# 6.7-7.6x (medians of four runs, level within their spread), where a newcomer's
# first audio waited for Mimi's call over every job's run (up to 220 ms).
TURN_MAX_JOBS = 3
# With int8 FlowLM, whose step gains less from a second core, the stages take turns for
# one job at most (see `SynthesisWorker`).
INT8_TURN_MAX_JOBS = 1
# Where PyTorch runs AVX2 kernels (no AVX-512), the stages take turns for one float32
# job only, and never with int8 FlowLM (see `SynthesisWorker`).
AVX2_TURN_MAX_JOBS = 1
AVX2_INT8_TURN_MAX_JOBS = 0


def default_turn_max_jobs(quantized: bool) -> int:
    """Up to how many active jobs the stages take turns by default (0: never): by
    FlowLM's weights and the CPU's vector kernels. ARM keeps the AVX-512 figures:
    neither way has been measured there."""
    if torch.backends.cpu.get_cpu_capability() == "AVX2":
        return AVX2_INT8_TURN_MAX_JOBS if quantized else AVX2_TURN_MAX_JOBS
    return INT8_TURN_MAX_JOBS if quantized else TURN_MAX_JOBS


def default_turn_call_frames(quantized: bool) -> int:
    """Frames a call waits for while the stages take turns: a job alone's run."""
    return INT8_TURN_CALL_FRAMES if quantized else TURN_RUN_FRAMES
