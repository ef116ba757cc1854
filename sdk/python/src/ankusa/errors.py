"""The SDK's errors. Every one carries ``code``, ``retryable``, ``field`` and ``status``.

``retryable`` is what a consumer acts on: ``False`` means the same input fails the same way
again (dead-letter it, answer a permanent status), ``True`` means try again later. Messages
name codes and fields, never a secret, a token or a header value.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


class AnkusaError(Exception):
    """Base class of every error the SDK raises on purpose."""

    code: str
    retryable: bool
    field: Optional[str]
    status: Optional[int]

    #: Whether errors of this class are retryable (``AdminError`` decides per instance).
    RETRYABLE: bool = False

    def __init__(
        self,
        code: str,
        *,
        field: Optional[str] = None,
        status: Optional[int] = None,
        message: Optional[str] = None,
        retryable: Optional[bool] = None,
    ) -> None:
        self.code = code
        self.field = field
        self.status = status
        self.retryable = self.RETRYABLE if retryable is None else retryable
        self.message = message
        super().__init__(self._describe())

    def _describe(self) -> str:
        text = self.code
        if self.field is not None:
            text += f" (field {self.field})"
        if self.status is not None:
            text += f" [status {self.status}]"
        if self.message:
            text += f": {self.message}"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, field={self.field!r}, "
            f"status={self.status!r}, retryable={self.retryable!r})"
        )


class InvalidSignatureError(AnkusaError):
    """The Standard Webhooks signature did not verify (a receiver answers 401)."""


class InvalidDeliveryError(AnkusaError):
    """A signed (or explicitly unsigned) delivery lacks what Ankusa always sends (400)."""


class MessageDecodeError(AnkusaError):
    """A queue message that does not decode. Permanent: the same bytes fail the same way."""


class InvalidClaimRefError(AnkusaError):
    """A claim reference that is not ``urn:ankusa:claim:v1:<tenant>:<claim_id>``."""


class ClaimNotFoundError(AnkusaError):
    """The claim port answered 404: the claim is gone (retention). Permanent."""


class ClaimCheckUnavailableError(AnkusaError):
    """The claim port could not be read now (408, 429, 5xx, a redirect, no connection,
    the timeout). Retryable: requeue the message with a delay."""

    RETRYABLE = True


class ClaimRejectedError(AnkusaError):
    """The claim port refused the request (401, 403, another status). Permanent for this
    message: fix the token, not the timing."""


class ClaimIntegrityError(AnkusaError):
    """The claimed body does not have the message's size and sha256. Permanent."""


class LifecycleEventError(AnkusaError):
    """A lifecycle CloudEvent that does not decode. Permanent."""


class AdminError(AnkusaError):
    """An admin API call failed. ``code`` is the API's JSON ``error`` code (or
    ``transport``, ``timeout``, ``invalid_response``, ``http_<status>`` when the answer has
    none); retryable for 408, 429, 5xx and transport failures."""

    def __init__(
        self,
        code: str,
        *,
        status: Optional[int] = None,
        field: Optional[str] = None,
        message: Optional[str] = None,
        scope: Optional[str] = None,
        retry_after_s: Optional[int] = None,
        body: Optional[Dict[str, Any]] = None,
        retryable: Optional[bool] = None,
    ) -> None:
        if retryable is None:
            retryable = status is None or status in (408, 429) or status >= 500
        self.scope = scope
        self.retry_after_s = retry_after_s
        self.body: Dict[str, Any] = body if body is not None else {}
        super().__init__(
            code, field=field, status=status, message=message, retryable=retryable
        )


__all__ = [
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
