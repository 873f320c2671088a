"""Webhooks as jobs: signed outbound deliveries (:class:`Endpoint`) and an inbound receiver
(:class:`Receiver`, an ASGI app), both per the Standard Webhooks specification.

Deliveries need the ``webhooks`` extra (httpx), loaded when the first one is sent; declaring an
endpoint and the receiver need nothing more than forklift. See docs/how-to/webhooks.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forklift.webhooks.endpoint import Endpoint as Endpoint
    from forklift.webhooks.errors import DeliveryFailed as DeliveryFailed
    from forklift.webhooks.errors import EndpointNotFound as EndpointNotFound
    from forklift.webhooks.errors import InvalidSecret as InvalidSecret
    from forklift.webhooks.errors import SignatureRefused as SignatureRefused
    from forklift.webhooks.event import Event as Event
    from forklift.webhooks.inbound import Inbound as Inbound
    from forklift.webhooks.receiver import Receiver as Receiver
    from forklift.webhooks.signing import Secret as Secret
    from forklift.webhooks.signing import new_secret as new_secret

_WHERE = {
    "Endpoint": "endpoint", "Event": "event", "Inbound": "inbound", "Receiver": "receiver",
    "Secret": "signing", "new_secret": "signing", "DeliveryFailed": "errors",
    "EndpointNotFound": "errors", "InvalidSecret": "errors", "SignatureRefused": "errors",
}

__all__ = ["DeliveryFailed", "Endpoint", "EndpointNotFound", "Event", "Inbound", "InvalidSecret",
           "Receiver", "Secret", "SignatureRefused", "new_secret"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'forklift.webhooks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"forklift.webhooks.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
