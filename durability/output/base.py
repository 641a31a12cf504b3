"""What every output model shares: frozen, built from a record's
attributes, dumped as ``--json`` prints it."""

from __future__ import annotations

import dataclasses
from typing import Any, Self, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

__all__ = ["Out", "mirror"]


class Out(BaseModel):
    # defer_build: a command that prints one kind of answer builds the
    # validators of that kind only (not of every model at import).
    model_config = ConfigDict(frozen=True, defer_build=True)

    @classmethod
    def from_record(cls, record: object, **more: Any) -> Self:
        """The model of ``record`` (a dataclass of the library or the
        store): its attributes named as the model's fields, and ``more``
        (fields the record does not hold, or holds otherwise)."""
        values = {name: getattr(record, name) for name in cls.model_fields
                  if name not in more and hasattr(record, name)}
        return cls.model_validate({**values, **more})

    def dump(self) -> dict[str, Any]:
        """The answer as JSON-ready Python values, as ``--json`` prints it
        (the field order is the model's; a name like ``from`` by its alias).
        Strings are left as they are (a path that is not UTF-8 holds lone
        surrogates: ``cli.options.emit`` escapes them)."""
        return self.model_dump(by_alias=True)


def mirror(record: type[Any], *, first: dict[str, Any] | None = None,
           **overrides: Any) -> type[Out]:
    """A model with exactly the fields (types, defaults, order) of
    ``record``, a dataclass: where the answer is the record, its schema
    follows the record instead of a copy of it.  ``first`` are fields put
    before the record's, ``overrides`` replace or follow them (both
    ``create_model`` field definitions)."""
    hints = get_type_hints(record)
    fields: dict[str, Any] = dict(first or {})
    fields.update({f.name: (hints[f.name], ... if f.default is dataclasses.MISSING
                            else f.default) for f in dataclasses.fields(record)})
    fields.update(overrides)
    return create_model(f"_{record.__name__}Fields", __base__=Out, **fields)
