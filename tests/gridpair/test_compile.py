"""A force-loss step traced with make_fx(tracing_mode="symbolic") and compiled once serves three
node counts with one Dynamo frame (CPU, reference composition inside the custom ops)."""

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from numerics import draw, force_step


def test_force_step_compiles_once_for_three_node_counts(compile_counter, launch_events,
                                                        monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "rtx-pro-6000-blackwell")

    def step(left, right, to_grid, from_grid):
        return force_step(left, right, to_grid, from_grid)

    first = draw(5, 9, 2, 3, 4, 23, seed=1, layout="degree_major").to(torch.float32)
    graph = make_fx(step, tracing_mode="symbolic")(first.left, first.right, first.to_grid,
                                                   first.from_grid)
    ops = {str(node.target) for node in graph.graph.nodes}
    assert {"gridpair.grid_pair_fwd.default", "gridpair.grid_pair_bwd.default",
            "gridpair.grid_pair_bwd2.default"} <= ops
    assert launch_events.ops("admitted") == {"fwd", "bwd", "bwd2"}  # selected while tracing
    compiled = torch.compile(graph, backend=compile_counter, dynamic=True)
    for nodes in (5, 8, 13):
        x = draw(nodes, 9, 2, 3, 4, 23, seed=nodes, layout="degree_major").to(torch.float32)
        got = compiled(x.left, x.right, x.to_grid, x.from_grid)
        want = step(x.left, x.right, x.to_grid, x.from_grid)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    compile_counter.assert_graphs(frames=1)
