"""The number types of every model: finite floats, strict 64-bit integers, strict booleans.

One definition each, for records, specs, run folders, server answers and import formats alike;
nothing is coerced. What they refuse, and why bounds are validators: docs/design.md, "Numbers".
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
