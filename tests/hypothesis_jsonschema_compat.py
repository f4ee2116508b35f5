"""Lets hypothesis-jsonschema 0.23.1 (its latest release) run on current Hypothesis.

hypothesis-jsonschema drives ``hypothesis.internal.conjecture.utils.many`` through the old
``while elements.more(): ... elements.reject()`` protocol; Hypothesis 6.150+ replaced it with
``with many(...) as elements: for _ in elements:``. This adapter gives the new object the old face.
Import ``from_schema`` from here; remove the module once hypothesis-jsonschema catches up.
"""

from hypothesis.internal.conjecture import utils as cu
from hypothesis_jsonschema import _from_schema
from hypothesis_jsonschema import from_schema as from_schema


class _OldStyleMany:
    def __init__(self, data, min_size, max_size, average_size, **kwargs):
        self._many = _NEW_MANY(data, min_size, max_size, average_size, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._elements)
        except StopIteration:
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why=None) -> None:
        self._many.reject(why)


_NEW_MANY = cu.many
if not hasattr(_NEW_MANY, "more"):
    _from_schema.cu = type("cu", (), {"many": _OldStyleMany})

__all__ = ["from_schema"]
