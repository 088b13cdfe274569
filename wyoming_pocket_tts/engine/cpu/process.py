"""The process-wide set-up of a process that runs the model: one explicit call,
`prepare_process`, first thing in each command's `main`.

Importing the package changes nothing in the process. What the set-up changes is
read by libraries at fixed moments, so its place matters: MKL reads its buffer
setting as torch is imported, PyTorch its huge-page setting at the first tensor,
oneDNN its cache sizes at its first use, and glibc fixes its heap limit once a
second thread has allocated (see allocator.py). A command therefore calls it before
it imports anything that imports torch, and says so in the log when it could not.
"""

from __future__ import annotations

import logging
import os
import sys

from .allocator import (
    MKL_BUFFERS_VARIABLE,
    choose_heap,
    use_huge_pages,
    use_transient_blas_buffers,
)
from .cores import limit_cores

_LOGGER = logging.getLogger(__name__)

# oneDNN, PyTorch's x86 kernel library, keeps a compiled kernel for every input shape
# it meets, up to 1024 in each of its two caches. A server meets a new shape with
# almost every new text length, so its memory would creep up by hundreds of MB over
# days. 128 leaves room for the shapes of several concurrent streams.
PRIMITIVE_CACHE_CAPACITY = "128"
PRIMITIVE_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def prepare_process(*, quantized: bool, threads: int | None = None) -> None:
    """Set up this process for serving a model: MKL frees its work buffers, large
    tensors go in 2 MB pages, oneDNN's kernel caches are bounded, the C heap is
    chosen for a float32 or an int8 (`quantized`) model, and at most `threads` cores
    are used (None: every core it may run on). Settings already in the environment
    are kept.

    Call before importing torch (importing this package's command modules does not)
    and before starting threads; a call after torch was imported logs a warning,
    since MKL then keeps its buffers.
    """
    if "torch" in sys.modules and MKL_BUFFERS_VARIABLE not in os.environ:
        _LOGGER.warning(
            "torch was imported before the process set-up: MKL keeps its work buffers "
            "(set %s=1 in the environment, or set up before importing torch)",
            MKL_BUFFERS_VARIABLE,
        )
    limit_cores(threads)
    use_transient_blas_buffers()
    use_huge_pages()
    for variable in PRIMITIVE_CACHE_VARIABLES:
        os.environ.setdefault(variable, PRIMITIVE_CACHE_CAPACITY)
    choose_heap(quantized)
