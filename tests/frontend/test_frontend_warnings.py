"""Warnings: those torch raises about its own code during capture (the user can do nothing
about them) are ignored where they arise, by message and module, not process-wide; the
user's own warnings still reach them."""

import copy
import warnings

import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG

LEAFSPEC = "`isinstance(treespec, LeafSpec)` is deprecated"


class Noisy(nn.Module):
    """A Linear layer whose forward warns, as a user's model may."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        warnings.warn("Noisy: the user's own warning", UserWarning, stacklevel=1)
        return self.fc(x)


def recorded(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def leafspec_copied():
    """What export does inside, outside of it: deep-copying a LeafSpec warns (copyreg)."""
    copy.deepcopy(torch.utils._pytree.treespec_leaf())


def test_torch_warnings_about_itself_are_ignored_the_users_are_not():
    messages = recorded(lambda: frontend.compile(Noisy(), (torch.randn(2, 4),),
                                                 config=CONFIG))
    assert not any(LEAFSPEC in m for m in messages), messages
    assert "Noisy: the user's own warning" in messages
    # the filter ends with the capture: the same warning outside it still shows
    assert any(LEAFSPEC in m for m in recorded(leafspec_copied))


def test_the_dynamo_backend_path_too():
    torch._dynamo.reset()
    model = nn.Linear(4, 3)
    messages = recorded(lambda: torch.compile(model, backend="fabric",
                                              options={"config": CONFIG})(torch.randn(2, 4)))
    assert not any(LEAFSPEC in m for m in messages), messages
