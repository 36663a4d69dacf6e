"""A runtime input made resident (`CompiledModel.make_resident`): every operand it feeds
gets it over the mesh from its home in PE memory instead of from the host, by a plan made
at once (`fabric.kernels.plan_redistribution`).

Example:
    >>> replaced = route_from_home(cm.prepared, cm.config, "w", home)  # doctest: +SKIP
    >>> restore(replaced)  # the host writes it again                  # doctest: +SKIP
"""

from __future__ import annotations

from fabric.config import FabricConfig
from fabric.kernels import WordMap, plan_redistribution
from frontend.capture import Captured
from frontend.errors import FrontendError
from frontend.runtime import PreparedStage, Source
from frontend.values import Tensor

# (an operand's sources, the index of the one replaced, the host's Source it replaced)
Replaced = list[tuple[list[Source], int, Source]]


def check_home(captured: Captured, tensors: dict[str, Tensor], name: str,
               home: WordMap) -> None:
    """FrontendError unless `name` is a runtime input and `home` maps its shape."""
    if name not in captured.user_inputs:
        raise FrontendError(f"make_resident: {name!r} is not a runtime input of the model "
                            f"(inputs: {', '.join(captured.user_inputs)})")
    want = tuple(tensors[name].shape)
    if tuple(home.shape) != want:
        raise FrontendError(f"make_resident: input {name!r} is {want}, its home map "
                            f"{tuple(home.shape)}")


def route_from_home(prepared: list[PreparedStage], config: FabricConfig, name: str,
                    home: WordMap) -> Replaced:
    """Every host write of input `name` into an operand replaced (in place) by a move from
    `home`; returns what it replaced, for `restore`."""
    replaced: Replaced = []
    for p in prepared:
        for sources in p.sources.values():
            for i, src in enumerate(sources):
                if src.tensor.name == name and src.plan is None:
                    plan = plan_redistribution(config, home, src.dst)
                    sources[i] = Source(src.tensor, src.dst, plan)
                    replaced.append((sources, i, src))
    return replaced


def restore(replaced: Replaced) -> None:
    """The host's writes back where `route_from_home` replaced them."""
    for sources, i, src in replaced:
        sources[i] = src
