"""How busy the machine was while a window measured: other processes' CPU, steal and load.

The only module that imports psutil (the sampler is added with the interleaved design). kbgen's
own process, the server it started and their children are not "other"; everything else is.
"""

from __future__ import annotations

from pydantic import Field

from kbgen.kb.models import Model


class MachineLoad(Model):
    """How busy the machine that ran the benchmark was during one window (psutil).

    kbgen's own process, the server it started and their children are not "other"; everything
    else is. A busy window measures the neighbours as much as the arms.
    """

    other_cpu_percent: float = Field(
        ge=0, description="CPU used by other processes, % of all cores, averaged over the window."
    )
    steal_percent: float | None = Field(
        default=None, ge=0, description="CPU time stolen by the hypervisor, % (None: not known)."
    )
    load_1m: float | None = Field(
        default=None, ge=0, description="1-minute load average at the window's end."
    )
    cpu_count: int = Field(ge=1, description="Logical CPUs of the machine.")
