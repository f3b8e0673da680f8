"""gridpair: the fused Triton grid-pair operator and its validated launch selector."""

from gridpair.launch import SELECTOR

__all__ = ["SELECTOR"]
