"""A launch selector in a few lines (the selector protocol of pytest-coldcompile): it admits
the tile a test asks for and tells its listeners, as a real selector does after validation."""

from collections.abc import Callable
from typing import Any


class ToySelector:
    name = "toy"

    def __init__(self) -> None:
        self.listeners: list[Callable[[Any], None]] = []

    def reset(self) -> None:
        pass  # nothing cached

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def admit(self, op: str, tile: int, shared: int) -> None:
        event = Event("admit", op, {"TILE": tile}, {"shared": shared, "limit": 232448}, "fits")
        for listener in list(self.listeners):
            listener(event)


class Event:
    def __init__(self, kind: str, op: str, config: dict, resources: dict, outcome: str) -> None:
        self.kind, self.op, self.config = kind, op, config
        self.resources, self.outcome = resources, outcome


SELECTOR = ToySelector()
