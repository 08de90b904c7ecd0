"""What the statement path makes once per shape and keeps from one statement to the next: parsed texts, split
statements, the steps' trees, their generated SQL, the receipts' queries. A producer sending one entry after another,
or a stream's micro-batches, send the same shapes again and again, and making them again cost more than the engine's
own work (docs/performance.md, "Where the time goes").

Each cache holds at most its size, and forgets everything at once when full: a long-lived process meeting ever new
shapes (a generated name, a VALUES list) holds a bounded amount, and the few shapes of a steady workload come back at
their next use. Any thread may use one (a lookup and a store are each one dict operation; two threads making the
same value at once keep one of them)."""
from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class Kept(Generic[V]):
    """A cache of at most ``size`` values.

    Example:
        >>> kept = Kept(2)
        >>> kept.made("a", lambda: 1), kept.made("a", lambda: 2), kept.made("b", lambda: 3), len(kept)
        (1, 1, 3, 2)
        >>> kept.made("c", lambda: 4), len(kept), kept.get("a")      # (full: everything forgotten first)
        (4, 1, None)
    """

    def __init__(self, size: int):
        self.size = size
        self._values: dict[Hashable, V] = {}

    def get(self, key: Hashable) -> V | None:
        return self._values.get(key)

    def keep(self, key: Hashable, value: V) -> V:
        """Keep ``value`` under ``key`` (everything else forgotten first, when full); ``value``."""
        if len(self._values) >= self.size:
            self._values.clear()
        self._values[key] = value
        return value

    def made(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value kept under ``key``, made by ``make`` and kept when there is none."""
        found = self._values.get(key)
        return self.keep(key, make()) if found is None else found

    def values(self) -> list[V]:
        return list(self._values.values())

    def __len__(self) -> int:
        return len(self._values)


__all__ = ["Kept"]
