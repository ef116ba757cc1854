"""Ankusa consumer SDK: receive HTTP deliveries, decode queue messages, redeem claim
checks, decode lifecycle events, and call the admin API. Standard library only.

HTTP receivers: ``ankusa.wsgi`` and ``ankusa.asgi``.
"""

from .__about__ import __version__
from .admin import (
    AdminClient,
    ArchiveWindow,
    DeadEntry,
    DeadFilter,
    DeadPage,
    PenEntry,
    QuarantinePage,
    ReplayJob,
)
from .claims import ClaimClient, Hook, to_hook
from .delivery import Delivery, ParsedHeaders, parse_headers, receive_delivery
from .errors import (
    AdminError,
    AnkusaError,
    ClaimCheckUnavailableError,
    ClaimIntegrityError,
    ClaimNotFoundError,
    ClaimRejectedError,
    InvalidClaimRefError,
    InvalidDeliveryError,
    InvalidSignatureError,
    LifecycleEventError,
    MessageDecodeError,
)
from .lifecycle import (
    KNOWN_TYPES,
    LIFECYCLE_SOURCE,
    LifecycleEvent,
    decode_lifecycle_event,
    lifecycle_event_from,
)
from .message import ClaimRef, Message, Verification, decode_message, parse_claim_ref
from .policy import idempotency_key, is_trusted
from .signature import VerifiedSignature, verify_signature

#: The name the conformance contract uses for ``is_trusted``.
trusted = is_trusted

__all__ = [
    "__version__",
    # HTTP deliveries
    "verify_signature",
    "VerifiedSignature",
    "receive_delivery",
    "parse_headers",
    "Delivery",
    "ParsedHeaders",
    # queue messages and claims
    "decode_message",
    "Message",
    "Verification",
    "parse_claim_ref",
    "ClaimRef",
    "ClaimClient",
    "to_hook",
    "Hook",
    # lifecycle events
    "decode_lifecycle_event",
    "lifecycle_event_from",
    "LifecycleEvent",
    "KNOWN_TYPES",
    "LIFECYCLE_SOURCE",
    # per hook
    "idempotency_key",
    "is_trusted",
    "trusted",
    # admin API
    "AdminClient",
    "DeadFilter",
    "DeadEntry",
    "DeadPage",
    "ReplayJob",
    "ArchiveWindow",
    "PenEntry",
    "QuarantinePage",
    # errors
    "AnkusaError",
    "InvalidSignatureError",
    "InvalidDeliveryError",
    "MessageDecodeError",
    "InvalidClaimRefError",
    "ClaimNotFoundError",
    "ClaimCheckUnavailableError",
    "ClaimRejectedError",
    "ClaimIntegrityError",
    "LifecycleEventError",
    "AdminError",
]
