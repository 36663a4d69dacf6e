"""Graph neural networks written as graph libraries write them: node features (N, F) and an
edge list `edge_index` (2, E) of (source, destination) node ids, messages gathered from the
sources (`x[src]`) and summed into the destinations (`scatter_add` / `index_add`), for the
model zoo (`frontend.architectures`, family "graph").

- `GCN`: two graph convolutions (Kipf and Welling), symmetric degree normalization with
  self loops: h' = D^-1/2 (A + I) D^-1/2 h W.
- `GraphSAGE`: two layers of mean aggregation beside the node's own features
  (h' = W [h, mean of h over in-neighbours]).
- `GAT`: one graph attention layer of two heads (Velickovic et al.): per edge a score
  leaky_relu(a_src . h[src] + a_dst . h[dst]), a softmax over each destination's edges as
  graph libraries write it (the scores shifted by their group's maximum, a scatter_reduce
  "amax", then exp, a scatter-add of the exps and a division) and the messages weighted
  by it.

Example:
    >>> model, (x, edges) = GCN().eval(), graph_inputs()
    >>> model(x, edges).shape
    torch.Size([12, 4])
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

NODES, FEATURES, EDGES, HIDDEN, CLASSES = 12, 16, 36, 32, 4


def graph_inputs(nodes: int = NODES, features: int = FEATURES, edges: int = EDGES,
                 seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (nodes, features), edge_index (2, edges) int64): seeded random features and edges,
    every node the destination of at least one edge (a ring) plus random ones."""
    gen = torch.Generator().manual_seed(seed)
    ring = torch.stack([torch.arange(nodes).roll(1), torch.arange(nodes)])
    extra = torch.randint(0, nodes, (2, edges - nodes), generator=gen)
    return torch.randn(nodes, features, generator=gen), torch.cat([ring, extra], 1)


def _sum_into(values: torch.Tensor, dst: torch.Tensor, nodes: int) -> torch.Tensor:
    """sum of values[e] over edges e into node dst[e]: (nodes, *values.shape[1:])."""
    out = values.new_zeros(nodes, *values.shape[1:])
    return out.index_add(0, dst, values)


class GCN(nn.Module):
    def __init__(self, features=FEATURES, hidden=HIDDEN, classes=CLASSES):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(features, hidden), nn.Linear(hidden, classes)])

    def forward(self, x, edge_index):
        src, dst = edge_index
        nodes = x.shape[0]
        # in-degree with the self loop, as scatter_add over the edges' destinations
        degree = torch.ones(nodes).scatter_add(0, dst, torch.ones(dst.shape[0]))
        norm = degree.rsqrt()
        weight = (norm[src] * norm[dst])[:, None]  # (E, 1)
        for i, layer in enumerate(self.layers):
            h = layer(x)
            messages = h[src] * weight
            self_loops = h * (norm * norm)[:, None]
            x = self_loops.scatter_add(0, dst.view(-1, 1).expand_as(messages), messages)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


class GraphSAGE(nn.Module):
    def __init__(self, features=FEATURES, hidden=HIDDEN, classes=CLASSES):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2 * features, hidden),
                                     nn.Linear(2 * hidden, classes)])

    def forward(self, x, edge_index):
        src, dst = edge_index
        nodes = x.shape[0]
        count = _sum_into(torch.ones(dst.shape[0]), dst, nodes).clamp(min=1)[:, None]
        for i, layer in enumerate(self.layers):
            mean = _sum_into(x[src], dst, nodes) / count
            x = layer(torch.cat([x, mean], dim=1))
            if i < len(self.layers) - 1:
                x = F.normalize(torch.relu(x), dim=1)
        return x


class GAT(nn.Module):
    def __init__(self, features=FEATURES, hidden=HIDDEN, classes=CLASSES, heads=2):
        super().__init__()
        self.heads, self.width = heads, hidden // heads
        self.project = nn.Linear(features, hidden, bias=False)
        self.att_src = nn.Parameter(torch.randn(heads, self.width) * 0.3)
        self.att_dst = nn.Parameter(torch.randn(heads, self.width) * 0.3)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, edge_index):
        src, dst = edge_index
        nodes = x.shape[0]
        h = self.project(x).view(nodes, self.heads, self.width)  # (N, H, W)
        score_src = (h * self.att_src).sum(-1)  # (N, H)
        score_dst = (h * self.att_dst).sum(-1)
        score = F.leaky_relu(score_src[src] + score_dst[dst], 0.2)  # (E, H)
        index = dst.view(-1, 1).expand_as(score)
        peak = score.new_zeros(nodes, self.heads).scatter_reduce(0, index, score, "amax",
                                                                 include_self=False)
        score = (score - peak[dst]).exp()
        alpha = score / _sum_into(score, dst, nodes)[dst]
        out = _sum_into(h[src] * alpha[..., None], dst, nodes)  # (N, H, W)
        return self.head(F.elu(out.reshape(nodes, -1)))
