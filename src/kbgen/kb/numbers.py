"""The number types of every model: finite floats, strict 64-bit integers, strict booleans.

One definition each, used by records, specs, run folders, server answers and import formats
alike, so that what counts as a number is decided once. YAML's `.nan` and `.inf`, JSON's `NaN`
and `Infinity`, a float literal past 1.8e308 (read as infinity) and an integer past 64 bits (a
JSON consumer — vLLM's `seed` among them — cannot hold it, and `math` overflows converting it)
are errors, located like any other. Booleans are not numbers (`repeats: true` is not one
repeat), numbers are not booleans, and a number in quotes is a string: nothing is coerced.

The ranges of these types are checked by validators, not by `Field(ge=...)`: Pydantic keeps one
bound of each kind, the type's, so a field's own `Field(ge=1)` on a type with a `ge` would be
silently dropped. A field adds its bounds with `Field` as usual.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, AllowInfNan, Strict
from pydantic_core import PydanticCustomError

# Output tokens of one request: past every served context length. A spec's max_tokens and a
# sample's token counts are bounded by it (here, so the client need not import the spec).
MAX_TOKENS = 1_048_576

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise PydanticCustomError("int64", "Input should fit in 64 bits (at most 2**63 - 1)")
    return value


def _non_negative(value: float) -> float:
    if value < 0:
        raise PydanticCustomError(
            "greater_than_equal", "Input should be greater than or equal to 0"
        )
    return value


# A float written as an integer (`mean: 62`) is a float; a boolean or a string is not.
Finite = Annotated[float, Strict(), AllowInfNan(False)]
NonNegative = Annotated[float, Strict(), AllowInfNan(False), AfterValidator(_non_negative)]
Int = Annotated[int, Strict(), AfterValidator(_int64)]
Count = Annotated[int, Strict(), AfterValidator(_int64), AfterValidator(_non_negative)]
Bool = Annotated[bool, Strict()]
