"""What the WSGI and ASGI receivers share: the decision on one delivery and its answer.

Answers, as the gateway's HTTP sink reads them: ``202`` accepted; ``401``/``400``
``{"error": code}`` refused (permanent: the gateway dead-letters it); ``413`` a body over
the receiver's limit; ``503`` the handler asked for a retry (returned ``False`` or raised a
retryable ``AnkusaError``); ``500`` the handler failed unexpectedly (the gateway retries).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from ._headers import HeadersLike
from .delivery import Delivery, receive_delivery
from .errors import AnkusaError
from .signature import DEFAULT_TOLERANCE_S, Secret

log = logging.getLogger("ankusa")

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

#: A handler returns ``None``/``True`` (done), ``False`` (retry later) or raises.
HandlerResult = Optional[bool]
Handler = Callable[[Delivery], Any]


@dataclass(frozen=True)
class ReceiverOptions:
    """How a receiver judges deliveries. With no ``secrets`` it refuses everything unless
    ``allow_unsigned`` is set."""

    secrets: Sequence[Secret] = field(default_factory=list)
    allow_unsigned: bool = False
    tolerance_s: int = DEFAULT_TOLERANCE_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def options_of(
    secrets: Union[Secret, Sequence[Secret], None],
    allow_unsigned: bool,
    tolerance_s: int,
    max_body_bytes: int,
) -> ReceiverOptions:
    if isinstance(secrets, (str, bytes, bytearray)):
        listed: List[Secret] = [secrets]
    else:
        listed = list(secrets or [])
    if max_body_bytes < 0:
        raise ValueError("max_body_bytes must not be negative")
    return ReceiverOptions(listed, allow_unsigned, tolerance_s, max_body_bytes)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: Tuple[Tuple[str, str], ...] = ()


_REASONS = {
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def reason(status: int) -> str:
    return _REASONS.get(status, "")


def json_answer(status: int, payload: Any, *extra: Tuple[str, str]) -> Answer:
    body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return Answer(status, body, (("content-type", "application/json"), *extra))


ACCEPTED = json_answer(202, {"status": "accepted"})
NOT_POST = json_answer(405, {"error": "method_not_allowed"}, ("allow", "POST"))
TOO_LARGE = json_answer(413, {"error": "body_too_large"})
BAD_LENGTH = json_answer(400, {"error": "invalid_content_length"})


def judge(headers: HeadersLike, body: bytes, options: ReceiverOptions) -> Union[Delivery, Answer]:
    """The delivery, or the refusal to answer."""
    try:
        return receive_delivery(
            headers,
            body,
            secrets=options.secrets,
            allow_unsigned=options.allow_unsigned,
            tolerance_s=options.tolerance_s,
        )
    except AnkusaError as e:
        return json_answer(e.status or 400, {"error": e.code})


def answer_for_result(result: Any) -> Answer:
    if result is False:
        return json_answer(503, {"error": "handler_declined"})
    return ACCEPTED


def answer_for_exception(e: BaseException) -> Answer:
    if isinstance(e, AnkusaError) and e.retryable:
        return json_answer(503, {"error": e.code})
    # The exception text may hold payload data: it goes to the log, never to the answer.
    log.error("ankusa receiver: the handler failed", exc_info=e)
    return json_answer(500, {"error": "internal_error"})
