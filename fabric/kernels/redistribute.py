"""Moving a tensor from one layout (`WordMap`) to another over the simulated mesh.

`plan_redistribution(config, src, dst)` (`redistribute_plan`) gives a `Redistribution`
(`redistribute_types`): the source word of every destination word, the flows carrying
them between PEs, and their rounds, each one Program (`redistribute_round`, built from
the ops and tiles of `redistribute_ops` and the DSD runs and chains of
`redistribute_code`), run one after another.

Between two kernel steps, PE memory stays where it is: take the producer's words from its
session and put the moved words into the consumer's (`layout.read_words`/`write_words`,
host-side, no cycles); the redistribution's own cycles are the fabric's.

Example:
    >>> plan = plan_redistribution(config, src_map, dst_map)           # doctest: +SKIP
    >>> words, cycles, stats = plan.run(read_words(producer_sim, src_map))  # doctest: +SKIP
    >>> write_words(consumer_sim, dst_map, words)                      # doctest: +SKIP
    >>> plan.report()  # rounds, flows, colors, model and estimated cycles  # doctest: +SKIP

Gates (`round_programs`, `deliveries`): the rounds' programs whose receiving PEs count their
deliveries into a word and start the consumer's tasks when the last one is in, so that a
consumer merged with its moves into one program is started by its data, not by the host.
Counters in memory (`round_programs(..., counters="memory")`): each chain counts its
activations in a word of its PE rather than a register, and every chain there uses one
scratch register (`SHARED_COUNTER`), which merged moves share where registers run short.
"""

from __future__ import annotations

from fabric.kernels.redistribute_ops import GATE, SHARED_COUNTER
from fabric.kernels.redistribute_plan import (
    deliveries,
    plan_redistribution,
    round_programs,
    split_best,
)
from fabric.kernels.redistribute_types import Move, Redistribution, Round

__all__ = ["GATE", "Move", "Redistribution", "Round", "SHARED_COUNTER", "deliveries",
           "plan_redistribution", "round_programs", "split_best"]
