"""Which backend runs the threshold statistics: fused (``torch.compile``) or plain torch.

The threshold compressors reduce a handful of statistics of ``|x|`` per full pass. In plain torch
each elementwise op writes a full-size temporary; ``torch.compile`` (Inductor) fuses a whole pass
into one kernel that reads ``x`` once, on CPU (C++/OpenMP) and on CUDA (Triton) alike.

The backend is chosen per call:

* ``COMPCTL_FUSED=off`` (or ``0``, ``plain``): always plain torch.
* ``COMPCTL_FUSED=on`` (or ``1``, ``fused``): fused for every size (tests use this).
* unset or ``auto``: fused from :data:`FUSED_MIN_NUMEL` elements up, where a one-off compile
  (seconds) is paid back; smaller tensors (and the test suite's) stay on plain torch.

If compiling fails (no C++ compiler, an unsupported backend), the failure is logged once and the
plain path is used from then on: the results are the same within float tolerance.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from sim.errors import InputError

__all__ = ["ENV_VAR", "FUSED_MIN_NUMEL", "fused_mode", "use_fused", "Fusable"]

log = logging.getLogger(__name__)

#: Environment variable that forces a backend.
ENV_VAR = "COMPCTL_FUSED"
#: Smallest tensor the ``auto`` mode fuses (1 Mi elements: a few ms of plain torch per pass).
FUSED_MIN_NUMEL = 1 << 20

_MODES = {"auto": "auto", "": "auto", "on": "on", "1": "on", "fused": "on", "off": "off", "0": "off", "plain": "off"}
_broken = threading.Event()

F = TypeVar("F", bound=Callable[..., Any])


def fused_mode() -> str:
    """``"auto"``, ``"on"`` or ``"off"`` from :data:`ENV_VAR` (a bad value is an input error)."""
    raw = os.environ.get(ENV_VAR, "auto").strip().lower()
    try:
        return _MODES[raw]
    except KeyError:
        raise InputError(f"{ENV_VAR}={raw!r}: use auto, on or off") from None


def use_fused(x: torch.Tensor) -> bool:
    """Whether the statistics of ``x`` run fused (see the module docstring)."""
    if _broken.is_set():
        return False
    mode = fused_mode()
    if mode == "off":
        return False
    return mode == "on" or x.numel() >= FUSED_MIN_NUMEL


class Fusable:
    """A pure tensor function with a plain and a lazily compiled form.

    ``fn`` is written once in torch ops; :meth:`__call__` runs the compiled form when
    ``fused`` is true (compiling on first use, ``dynamic=True`` so one graph serves every size)
    and the eager form otherwise, or after any compile failure.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any, fused: bool) -> Any:
        """``fn(*args)``, fused or plain."""
        if fused and not _broken.is_set():
            try:
                return self._get()(*args)
            except Exception as exc:  # any compile/backend failure: fall back for good
                _broken.set()
                log.warning("torch.compile failed (%s); using plain torch from now on", exc)
        return self.fn(*args)

    def _get(self) -> Callable[..., Any]:
        with self._lock:
            if self._compiled is None:
                self._compiled = torch.compile(self.fn, dynamic=True)
            return self._compiled
