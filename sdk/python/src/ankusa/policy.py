"""What a consumer decides per hook: the key to dedupe on, and whether to trust it.

Both accept any of the SDK's hook shapes: ``Message``, ``Hook``, ``ParsedHeaders`` and
``Delivery`` (anything with ``idempotency_key``, ``replay_id`` and ``verification``).
"""

from __future__ import annotations

from typing import Optional, Protocol

from .message import Verification


class HookLike(Protocol):
    @property
    def idempotency_key(self) -> str: ...

    @property
    def replay_id(self) -> Optional[str]: ...

    @property
    def verification(self) -> Optional[Verification]: ...


def idempotency_key(hook: HookLike, include_replay: bool = False) -> str:
    """The key to dedupe on. With ``include_replay`` and a replay id,
    ``<key>#replay:<replay_id>``, so a replayed delivery is processed again rather than
    dropped as a duplicate."""
    key: str = hook.idempotency_key
    replay: Optional[str] = hook.replay_id
    if include_replay and replay:
        return f"{key}#replay:{replay}"
    return key


def is_trusted(hook: HookLike) -> bool:
    """True only when the gateway verified the provider's signature (``status: ok``) and
    did not flag the hook. Failed, skipped, flagged, an unknown status and a missing
    verification are all untrusted."""
    v = hook.verification
    return v is not None and v.status == "ok" and v.flagged is False
