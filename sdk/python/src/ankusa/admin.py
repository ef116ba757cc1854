"""A small client of the admin API: dead letters, replay jobs, the quarantine pen.

The dataclasses mirror the gateway's wire types (``api/src/dlq.rs``, ``api/src/replay.rs``,
``api/src/store.rs``); fields a gateway of another version leaves out read as their
defaults, unknown ones are ignored. Failures are ``AdminError`` with the API's ``error``
code and ``status``; 408, 429, 5xx and transport failures are retryable.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence
from urllib.parse import quote, urlencode

from ._http import Endpoint, TransportFailure
from .errors import AdminError

DEFAULT_TIMEOUT_S = 10.0
# A DLQ page of 1000 entries is a few hundred KiB; this only stops a runaway answer.
_MAX_ANSWER_BYTES = 64 * 1024 * 1024
_TOKEN = re.compile(r"[\x21-\x7e]+(?: +[\x21-\x7e]+)*")
_JOB_STATES = ("running", "paused", "cancelled")


class _Shape:
    """Reads one JSON object of an answer; a field of the wrong type is ``invalid_response``."""

    def __init__(self, obj: Any, what: str) -> None:
        if not isinstance(obj, dict):
            raise AdminError("invalid_response", message=f"{what} is not an object", retryable=False)
        self.obj: Dict[str, Any] = obj
        self.what = what

    def _bad(self, key: str) -> AdminError:
        return AdminError(
            "invalid_response", field=key, message=f"{self.what}.{key} has the wrong type",
            retryable=False,
        )

    def integer(self, key: str, default: Optional[int] = 0) -> int:
        value = self.obj.get(key, default)
        if value is None and default is None:
            raise self._bad(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._bad(key)
        return value

    def opt_integer(self, key: str) -> Optional[int]:
        value = self.obj.get(key)
        if value is None:
            return None
        return self.integer(key)

    def text(self, key: str, default: Optional[str] = "") -> str:
        value = self.obj.get(key, default)
        if not isinstance(value, str):
            raise self._bad(key)
        return value

    def opt_text(self, key: str) -> Optional[str]:
        value = self.obj.get(key)
        if value is None:
            return None
        return self.text(key)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise self._bad(key)
        return value

    def items(self, key: str) -> List[Any]:
        value = self.obj.get(key, [])
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._bad(key)
        return value


# --- dead letters (api/src/dlq.rs) ---------------------------------------------------------


@dataclass(frozen=True)
class DeadFilter:
    """Which dead letters a request or a replay job means; set fields combine with AND."""

    tenant: Optional[str] = None
    source_id: Optional[str] = None
    #: One hook (a UUID).
    id: Optional[str] = None
    #: A sink index of the source.
    sink: Optional[int] = None
    #: ``permanent``, ``throttled`` or ``transient``.
    error_class: Optional[str] = None
    #: Dead-lettered (or, for other job kinds, received) at or after, unix ms.
    since: Optional[int] = None
    #: ... at or before, unix ms.
    until: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, obj: Any) -> "DeadFilter":
        s = _Shape(obj if obj is not None else {}, "filter")
        return cls(
            tenant=s.opt_text("tenant"),
            source_id=s.opt_text("source_id"),
            id=s.opt_text("id"),
            sink=s.opt_integer("sink"),
            error_class=s.opt_text("error_class"),
            since=s.opt_integer("since"),
            until=s.opt_integer("until"),
        )


@dataclass(frozen=True)
class DeadEntry:
    """One dead letter of ``GET /v1/dlq``."""

    id: str
    seq: int
    tenant: str
    source_id: str
    sink: int
    sink_type: str
    error_class: str
    reason: Optional[str]
    attempts: int
    dead_at: int
    first_attempt_at: Optional[int]
    #: ``None`` when the hook can no longer be read.
    received_at: Optional[int]
    size: int
    #: The replay job whose delivery died again.
    replay_id: Optional[str]

    @classmethod
    def from_json(cls, obj: Any) -> "DeadEntry":
        s = _Shape(obj, "entry")
        return cls(
            id=s.text("id"),
            seq=s.integer("seq"),
            tenant=s.text("tenant"),
            source_id=s.text("source_id"),
            sink=s.integer("sink"),
            sink_type=s.text("sink_type"),
            error_class=s.text("error_class"),
            reason=s.opt_text("reason"),
            attempts=s.integer("attempts"),
            dead_at=s.integer("dead_at"),
            first_attempt_at=s.opt_integer("first_attempt_at"),
            received_at=s.opt_integer("received_at"),
            size=s.integer("size"),
            replay_id=s.opt_text("replay_id"),
        )


@dataclass(frozen=True)
class DeadPage:
    """``GET /v1/dlq``: newest first. Follow ``next_cursor`` until it is ``None`` (a sparse
    filter can return a short, even empty, page with a cursor)."""

    entries: List[DeadEntry]
    next_cursor: Optional[str]
    #: Exact where it is free (a counter, or a filtered first page that reached the end).
    total: Optional[int]
    #: Keys this request examined.
    examined: int

    @classmethod
    def from_json(cls, obj: Any) -> "DeadPage":
        s = _Shape(obj, "page")
        return cls(
            entries=[DeadEntry.from_json(e) for e in s.items("entries")],
            next_cursor=s.opt_text("next_cursor"),
            total=s.opt_integer("total"),
            examined=s.integer("examined"),
        )


# --- replay jobs (api/src/replay.rs) -------------------------------------------------------


@dataclass(frozen=True)
class ArchiveWindow:
    """An ``archive`` job's window (received at or after ``from_``, before ``to``, unix ms)
    and sink subset (empty: every sink of the source)."""

    from_: int
    to: int
    sinks: List[int] = field(default_factory=list)

    @classmethod
    def from_json(cls, obj: Any) -> "ArchiveWindow":
        s = _Shape(obj, "archive")
        sinks = s.items("sinks")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in sinks):
            raise AdminError("invalid_response", field="sinks", retryable=False)
        return cls(from_=s.integer("from"), to=s.integer("to"), sinks=list(sinks))


@dataclass(frozen=True)
class ReplayJob:
    """A replay job with its progress (``GET /v1/replays/{id}``, and the answer to a create
    or a patch). ``done``: the scan completed and every moved row settled."""

    id: str
    state: str
    kind: str = ""
    filter: DeadFilter = field(default_factory=DeadFilter)
    rate: int = 0
    max_lag_ms: int = 0
    pause_after_dead: int = 0
    created_at: int = 0
    updated_at: int = 0
    completed_at: Optional[int] = None
    cursor: Optional[str] = None
    moved: int = 0
    scanned: int = 0
    released: int = 0
    skipped: int = 0
    archive: Optional[ArchiveWindow] = None
    corrupt_segments: int = 0
    reason: Optional[str] = None
    delivered: int = 0
    failed: int = 0
    outstanding: int = 0
    done: bool = False
    ignore_filters: bool = False

    @classmethod
    def from_json(cls, obj: Any) -> "ReplayJob":
        s = _Shape(obj, "job")
        archive = s.obj.get("archive")
        return cls(
            id=s.text("id", None),
            state=s.text("state", None),
            kind=s.text("kind"),
            filter=DeadFilter.from_json(s.obj.get("filter")),
            rate=s.integer("rate"),
            max_lag_ms=s.integer("max_lag_ms"),
            pause_after_dead=s.integer("pause_after_dead"),
            created_at=s.integer("created_at"),
            updated_at=s.integer("updated_at"),
            completed_at=s.opt_integer("completed_at"),
            cursor=s.opt_text("cursor"),
            moved=s.integer("moved"),
            scanned=s.integer("scanned"),
            released=s.integer("released"),
            skipped=s.integer("skipped"),
            archive=ArchiveWindow.from_json(archive) if archive is not None else None,
            corrupt_segments=s.integer("corrupt_segments"),
            reason=s.opt_text("reason"),
            delivered=s.integer("delivered"),
            failed=s.integer("failed"),
            outstanding=s.integer("outstanding"),
            done=s.flag("done"),
            ignore_filters=s.flag("ignore_filters"),
        )


# --- the quarantine pen (api/src/store.rs) -------------------------------------------------


@dataclass(frozen=True)
class PenEntry:
    """One entry of the quarantine pen, without its body."""

    id: str
    source_id: str
    tenant: str
    received_at: int
    #: Why verification failed (``no_matching_signature``, ...).
    reason: str
    #: What the entry counts against ``quarantine.max_bytes``.
    size: int
    method: str
    path: str
    #: The tenant came from the URL (``routing: tenant_path``).
    url_tenant: bool

    @classmethod
    def from_json(cls, obj: Any) -> "PenEntry":
        s = _Shape(obj, "entry")
        return cls(
            id=s.text("id"),
            source_id=s.text("source_id"),
            tenant=s.text("tenant"),
            received_at=s.integer("received_at"),
            reason=s.text("reason"),
            size=s.integer("size"),
            method=s.text("method"),
            path=s.text("path"),
            url_tenant=s.flag("url_tenant"),
        )


@dataclass(frozen=True)
class QuarantinePage:
    """``GET /v1/quarantine``: newest first. ``total`` and ``bytes`` (the whole pen) only
    without a filter and for a token that sees every tenant."""

    entries: List[PenEntry]
    total: Optional[int]
    bytes: Optional[int]
    next_cursor: Optional[str]

    @classmethod
    def from_json(cls, obj: Any) -> "QuarantinePage":
        s = _Shape(obj, "page")
        return cls(
            entries=[PenEntry.from_json(e) for e in s.items("entries")],
            total=s.opt_integer("total"),
            bytes=s.opt_integer("bytes"),
            next_cursor=s.opt_text("next_cursor"),
        )


# --- the client ------------------------------------------------------------------------------


def _query(params: Mapping[str, Any]) -> str:
    present = {k: str(v) for k, v in params.items() if v is not None}
    return "?" + urlencode(present) if present else ""


class AdminClient:
    """The admin API of one node (``admin.port``, 4002 by default).

    ``token``: a bearer token of ``admin.tokens`` (a tenant-limited one works the same way:
    the API holds it to its tenants). ``ca_file``: the PEM bundle of the CA that issued the
    admin certificate, for an ``https://`` base URL (``admin.tls``).
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str],
        ca_file: Optional[str] = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if token is not None and _TOKEN.fullmatch(token) is None:
            raise ValueError("token must be printable ASCII without leading or trailing spaces")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self._endpoint = Endpoint(base_url, ca_file=ca_file)
        self._token = token
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never the token
        return f"AdminClient(host={self._endpoint.host!r}, port={self._endpoint.port})"

    # -- dead letters --

    def list_dlq(
        self,
        *,
        tenant: Optional[str] = None,
        source_id: Optional[str] = None,
        sink: Optional[int] = None,
        error_class: Optional[str] = None,
        since: Optional[int] = None,
        until: Optional[int] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> DeadPage:
        """One page of ``GET /v1/dlq`` (newest first)."""
        query = _query(
            dict(tenant=tenant, source_id=source_id, sink=sink, error_class=error_class,
                 since=since, until=until, limit=limit, cursor=cursor)
        )
        return DeadPage.from_json(self._call("GET", "/v1/dlq" + query))

    def iter_dlq(self, **filters: Any) -> Iterator[DeadEntry]:
        """Every dead letter matching ``filters`` (those of ``list_dlq``), page by page."""
        cursor: Optional[str] = filters.pop("cursor", None)
        while True:
            page = self.list_dlq(cursor=cursor, **filters)
            yield from page.entries
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # -- replay jobs --

    def create_replay(
        self,
        *,
        kind: str = "dlq",
        job_id: Optional[str] = None,
        tenant: Optional[str] = None,
        source_id: Optional[str] = None,
        id: Optional[str] = None,  # noqa: A002 - the API's name for a hook id filter
        sink: Optional[int] = None,
        error_class: Optional[str] = None,
        since: Optional[int] = None,
        until: Optional[int] = None,
        rate: Optional[int] = None,
        max_lag_ms: Optional[int] = None,
        pause_after_dead: Optional[int] = None,
        from_: Optional[int] = None,
        to: Optional[int] = None,
        sinks: Optional[Sequence[int]] = None,
        ignore_filters: Optional[bool] = None,
    ) -> ReplayJob:
        """``POST /v1/replays``: a job of ``kind`` ``dlq`` (default), ``quarantine``,
        ``archive`` (``from_``/``to``, optional ``sinks``) or ``lifecycle`` (``since``
        required); ``ignore_filters`` (``dlq``, ``archive``) sends whether or not each sink's
        filter takes the hook. Creating the same ``job_id`` with the same filter again returns it."""
        flt = DeadFilter(tenant=tenant, source_id=source_id, id=id, sink=sink,
                         error_class=error_class, since=since, until=until).to_json()
        body: Dict[str, Any] = {"kind": kind}
        for key, value in (("job_id", job_id), ("rate", rate), ("max_lag_ms", max_lag_ms),
                           ("pause_after_dead", pause_after_dead), ("from", from_), ("to", to)):
            if value is not None:
                body[key] = value
        if sinks is not None:
            body["sinks"] = list(sinks)
        if ignore_filters is not None:
            body["ignore_filters"] = bool(ignore_filters)
        if flt:
            body["filter"] = flt
        return ReplayJob.from_json(self._call("POST", "/v1/replays", body))

    def get_replay(self, job_id: str) -> ReplayJob:
        """``GET /v1/replays/{id}``."""
        return ReplayJob.from_json(self._call("GET", "/v1/replays/" + _segment(job_id)))

    def list_replays(self) -> List[ReplayJob]:
        """``GET /v1/replays``: every job (a tenant-limited token: its tenants'), newest first."""
        answer = _Shape(self._call("GET", "/v1/replays"), "answer")
        return [ReplayJob.from_json(j) for j in answer.items("jobs")]

    def patch_replay(self, job_id: str, state: str) -> ReplayJob:
        """``PATCH /v1/replays/{id}``: ``running``, ``paused`` or ``cancelled``."""
        if state not in _JOB_STATES:
            raise ValueError("state must be running, paused or cancelled")
        path = "/v1/replays/" + _segment(job_id)
        return ReplayJob.from_json(self._call("PATCH", path, {"state": state}))

    # -- the quarantine pen --

    def list_quarantine(
        self,
        *,
        tenant: Optional[str] = None,
        source_id: Optional[str] = None,
        id: Optional[str] = None,  # noqa: A002 - the API's name for an entry id filter
        since: Optional[int] = None,
        until: Optional[int] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> QuarantinePage:
        """One page of ``GET /v1/quarantine`` (newest first, without bodies)."""
        query = _query(dict(tenant=tenant, source_id=source_id, id=id, since=since,
                            until=until, limit=limit, cursor=cursor))
        return QuarantinePage.from_json(self._call("GET", "/v1/quarantine" + query))

    # -- transport --

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        headers = {"Accept": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            answer = self._endpoint.exchange(
                method, path, headers=headers, body=data, timeout_s=self.timeout_s,
                limit=_MAX_ANSWER_BYTES,
            )
        except TransportFailure as e:
            raise AdminError(e.kind if e.kind == "timeout" else "transport",
                             message=e.kind) from None
        parsed = _json_or_none(answer.body)
        if 200 <= answer.status < 300:
            if answer.over_limit or parsed is None:
                raise AdminError("invalid_response", status=answer.status,
                                 message="the answer is not JSON", retryable=False)
            return parsed
        raise _admin_error(answer.status, parsed, answer.headers.get("retry-after"))


def _segment(value: str) -> str:
    return quote(value, safe="")


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _admin_error(status: int, obj: Any, retry_after: Optional[str]) -> AdminError:
    wait = int(retry_after) if retry_after and retry_after.isdigit() else None
    if isinstance(obj, dict) and isinstance(obj.get("error"), str):
        def text(key: str) -> Optional[str]:
            value = obj.get(key)
            return value if isinstance(value, str) else None

        return AdminError(obj["error"], status=status, field=text("field"),
                          message=text("message"), scope=text("scope"),
                          retry_after_s=wait, body=obj)
    # A path that is not a route (404) or a wrong method (405) answers an empty body.
    return AdminError(f"http_{status}", status=status, retry_after_s=wait)
