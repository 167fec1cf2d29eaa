"""``decide``: typed questions to an operator-configured decision model, answered with integer encodings.

harness.md §16 (request, answer, providers, exchange rules) and the ``decide:<group>`` buckets of §14.
The HTTP providers (and httpx) load only when a provider is configured: ``decide.providers``.
"""

from wakeful.harness.decide.answer import convert
from wakeful.harness.decide.errors import DecideFailure, ProviderError
from wakeful.harness.decide.request import validate_request
from wakeful.harness.decide.service import Decider, Provider
from wakeful.harness.decide.settings import DecideSettings

__all__ = [
    "DecideFailure",
    "DecideSettings",
    "Decider",
    "Provider",
    "ProviderError",
    "convert",
    "validate_request",
]
