"""Counters of a run, read back from the fabric state into numpy (`Stats`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric.isa import Port


@dataclasses.dataclass
class Stats:
    """What a run did. Per-PE arrays have shape (R, C); `link_count` is (R, C, 4) in port
    order N, S, E, W (wavelets sent through each link); `color_count` is (K,) wavelets
    forwarded per color, summed over routers.

    Cycle counts are totals since the program was loaded; `run_cycles` is the last run's.
    `bank_stall` counts the cycles an op spent on the first read of a bank conflict (also
    in `stall`, but for a cycle in which the task was busy issuing).
    """

    cycles: int
    run_cycles: int
    busy: np.ndarray
    stall: np.ndarray
    bank_stall: np.ndarray
    link_count: np.ndarray
    color_count_per_pe: np.ndarray
    sram_bytes_used: np.ndarray
    injected: int
    delivered: int
    consumed: int
    forked: int
    in_flight: int
    host_cycles: int
    compile_s: float
    wall_s: float
    sram_bytes_per_pe: int

    @property
    def color_count(self) -> np.ndarray:
        return self.color_count_per_pe.sum(axis=(0, 1))

    @property
    def num_pes(self) -> int:
        return int(self.busy.size)

    @property
    def utilization(self) -> float:
        """Busy PE-cycles over all PE-cycles."""
        return float(self.busy.sum()) / max(1, self.cycles * self.num_pes)

    @property
    def pe_cycles_per_s(self) -> float:
        """Simulated PE-cycles per wall second of the last run (compile time excluded)."""
        return self.run_cycles * self.num_pes / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def cycles_per_s(self) -> float:
        return self.run_cycles / self.wall_s if self.wall_s > 0 else float("nan")

    def link_total(self, port: Port) -> int:
        return int(self.link_count[..., int(port)].sum())

    def summary(self) -> str:
        rows, cols = self.busy.shape
        return "\n".join([
            f"fabric            {rows} x {cols} PEs",
            f"kernel cycles     {self.cycles}",
            f"host I/O cycles   {self.host_cycles}  (edge transfers, apart from kernel cycles)",
            f"utilization       {100 * self.utilization:.1f} % of PE-cycles busy",
            f"stall PE-cycles   {int(self.stall.sum())} (bank conflicts "
            f"{int(self.bank_stall.sum())})",
            f"wavelets          injected {self.injected}, delivered {self.delivered}, "
            f"consumed {self.consumed}, multicast copies {self.forked}, in flight {self.in_flight}",
            f"link traversals   {int(self.link_count.sum())}",
            f"SRAM used         max {int(self.sram_bytes_used.max())} of "
            f"{self.sram_bytes_per_pe} B per PE",
            f"compile           {self.compile_s:.2f} s",
            f"run               {self.wall_s:.3f} s, {self.pe_cycles_per_s:,.0f} PE-cycles/s",
        ])
