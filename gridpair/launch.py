"""Placeholder selector until the validated selector lands (issue 3)."""


class _Selector:
    name = "gridpair"

    def __init__(self):
        self._listeners = []

    def reset(self):
        pass

    def subscribe(self, listener):
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


SELECTOR = _Selector()
