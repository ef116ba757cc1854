#!/usr/bin/env python3
"""Runs every conformance case of a directory through the ``ankusa`` package's public API.

    python3 sdk/python/conformance/runner.py --cases conformance/cases

Loads every ``*.json`` (sorted), runs each case, never skips; a case whose ``operation`` is
unknown fails. Prints ``FAIL <file> <id>: <why>`` per failure, then ``N passed, N failed``;
exits 1 on any failure or when the directory held no case. The package is imported as a
user imports it (``import ankusa``): from ``sdk/python/src`` unless ``--installed`` is given.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent


def _import_sdk(installed: bool) -> Any:
    if not installed:
        sys.path.insert(0, str(HERE.parent / "src"))
    sys.path.insert(0, str(HERE))
    import ankusa

    return ankusa


class CaseFailure(Exception):
    """Why one case failed."""


# --- bodies ---------------------------------------------------------------------------------


def body_bytes(spec: Any) -> bytes:
    if not isinstance(spec, dict) or len(spec) != 1:
        raise CaseFailure(f"a body must be one of text/base64/json, got {json.dumps(spec)[:80]}")
    (kind, value), = spec.items()
    if kind == "text":
        return value.encode("utf-8")
    if kind == "base64":
        return base64.b64decode(value, validate=True)
    if kind == "json":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raise CaseFailure(f"unknown body kind {kind!r}")


def body_matches(expected: Any, actual: Optional[bytes]) -> bool:
    if expected is None:
        return actual is None
    if actual is None:
        return False
    if isinstance(expected, dict) and set(expected) == {"json"}:
        try:
            return json.loads(actual.decode("utf-8")) == expected["json"]
        except (UnicodeDecodeError, ValueError):
            return False
    return body_bytes(expected) == actual


def show(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        try:
            value = {"text": bytes(value).decode("utf-8")}
        except UnicodeDecodeError:
            value = {"base64": base64.b64encode(value).decode()}
    text = json.dumps(value, default=repr, sort_keys=True)
    return text if len(text) <= 300 else text[:300] + "..."


# --- results ------------------------------------------------------------------------------------


def plain(result: Any) -> Any:
    """A result as JSON-like data (dataclasses to dicts; bytes kept for body comparison)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {f.name: plain(getattr(result, f.name)) for f in dataclasses.fields(result)}
    if isinstance(result, dict):
        return {k: plain(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return [plain(v) for v in result]
    return result


def check_ok(expected: Any, result: Any) -> None:
    actual = plain(result)
    if not isinstance(expected, dict):
        if type(expected) is not type(actual) or expected != actual:
            raise CaseFailure(f"expected {show(expected)}, got {show(actual)}")
        return
    if not isinstance(actual, dict):
        raise CaseFailure(f"expected an object, got {show(actual)}")
    for key, want in expected.items():
        if key not in actual:
            raise CaseFailure(f"the result has no {key!r}")
        got = actual[key]
        if key == "body":
            if not body_matches(want, got):
                raise CaseFailure(f"body: expected {show(want)}, got {show(got)}")
        elif not same(want, got):
            raise CaseFailure(f"{key}: expected {show(want)}, got {show(got)}")


def same(want: Any, got: Any) -> bool:
    """JSON equality that keeps true/1 and false/0 apart."""
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and want == got
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(want) == set(got)
            and all(same(want[k], got[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(want) == len(got)
            and all(same(a, b) for a, b in zip(want, got))
        )
    if want is None or got is None:
        return want is got
    return bool(want == got)


def check_error(sdk: Any, expected: Dict[str, Any], error: BaseException) -> None:
    if not isinstance(error, sdk.AnkusaError):
        raise CaseFailure(f"expected an error, got {type(error).__name__}: {error}")
    fields = {
        "class": type(error).__name__,
        "code": error.code,
        "retryable": error.retryable,
        "field": error.field,
        "status": error.status,
    }
    for key, want in expected.items():
        if key not in fields:
            raise CaseFailure(f"unknown error key {key!r} in the expectation")
        if not same(want, fields[key]):
            raise CaseFailure(f"error {key}: expected {show(want)}, got {show(fields[key])} ({error!r})")


# --- operations -----------------------------------------------------------------------------


class Operations:
    def __init__(self, sdk: Any) -> None:
        self.sdk = sdk
        self._gateway: Any = None
        self.requests: Optional[List[Dict[str, Any]]] = None

    def close(self) -> None:
        if self._gateway is not None:
            self._gateway.close()

    def table(self) -> Dict[str, Callable[[Dict[str, Any]], Any]]:
        return {
            "verify_signature": self.verify_signature,
            "parse_headers": self.parse_headers,
            "receive_delivery": self.receive_delivery,
            "decode_message": self.decode_message,
            "trusted": self.trusted,
            "idempotency_key": self.idempotency_key,
            "parse_claim_ref": self.parse_claim_ref,
            "redeem_claim": self.redeem_claim,
            "decode_lifecycle_event": self.decode_lifecycle_event,
        }

    def verify_signature(self, i: Dict[str, Any]) -> Any:
        return self.sdk.verify_signature(
            i["headers"], body_bytes(i["body"]), i["secrets"],
            now=i["now"], tolerance_s=i.get("tolerance_s", 300),
        )

    def parse_headers(self, i: Dict[str, Any]) -> Any:
        return self.sdk.parse_headers(i["headers"])

    def receive_delivery(self, i: Dict[str, Any]) -> Any:
        return self.sdk.receive_delivery(
            i["headers"], body_bytes(i["body"]),
            secrets=i.get("secrets"), allow_unsigned=i.get("allow_unsigned", False),
            now=i.get("now"), tolerance_s=i.get("tolerance_s", 300),
        )

    def decode_message(self, i: Dict[str, Any]) -> Any:
        return self.sdk.decode_message(body_bytes(i["message"]))

    def _hook(self, i: Dict[str, Any]) -> Any:
        if "message" in i:
            return self.sdk.decode_message(body_bytes(i["message"]))
        if "headers" in i:
            return self.sdk.parse_headers(i["headers"])
        raise CaseFailure("the input names neither message nor headers")

    def trusted(self, i: Dict[str, Any]) -> Any:
        return self.sdk.is_trusted(self._hook(i))

    def idempotency_key(self, i: Dict[str, Any]) -> Any:
        return self.sdk.idempotency_key(self._hook(i), i.get("include_replay", False))

    def parse_claim_ref(self, i: Dict[str, Any]) -> Any:
        return self.sdk.parse_claim_ref(i["ref"])

    def redeem_claim(self, i: Dict[str, Any]) -> Any:
        from mock_gateway import MockGateway, Script, closed_port_url

        gateway = i["gateway"]
        self.requests = None
        if gateway.get("unreachable"):
            base = closed_port_url()
            self.requests = []
        elif "url" in gateway:
            base = gateway["url"]
        else:
            if self._gateway is None:
                self._gateway = MockGateway()
            body = body_bytes(gateway["body"]) if gateway.get("body") is not None else b""
            self._gateway.arm(Script(gateway["status"], dict(gateway.get("headers") or {}),
                                     body, int(gateway.get("delay_ms", 0))))
            base = self._gateway.url
        message = self.sdk.decode_message(body_bytes(i["message"]))
        client = self.sdk.ClaimClient(base, token=i.get("token"),
                                      timeout_s=i.get("timeout_ms", 5000) / 1000)
        return self.sdk.to_hook(message, client)

    def recorded_requests(self) -> List[Dict[str, Any]]:
        if self.requests is not None:
            return self.requests
        return self._gateway.requests() if self._gateway is not None else []

    def decode_lifecycle_event(self, i: Dict[str, Any]) -> Any:
        if "event" in i:
            return self.sdk.decode_lifecycle_event(body_bytes(i["event"]))
        message = self.sdk.decode_message(body_bytes(i["message"]))
        return self.sdk.lifecycle_event_from(message)


def check_requests(expected: List[Dict[str, Any]], actual: List[Dict[str, Any]]) -> None:
    if len(expected) != len(actual):
        raise CaseFailure(
            f"the gateway got {len(actual)} request(s), expected {len(expected)}: "
            + show([{"method": r["method"], "path": r["path"]} for r in actual])
        )
    for n, (want, got) in enumerate(zip(expected, actual)):
        for key in ("method", "path"):
            if key in want and want[key] != got[key]:
                raise CaseFailure(f"request {n} {key}: expected {want[key]!r}, got {got[key]!r}")
        for name, value in (want.get("headers") or {}).items():
            if got["headers"].get(name.lower()) != value:
                raise CaseFailure(f"request {n} header {name}: expected {value!r}, "
                                  f"got {got['headers'].get(name.lower())!r}")


# --- the run --------------------------------------------------------------------------------


def load_cases(directory: Path) -> List[Tuple[str, Any]]:
    found: List[Tuple[str, Any]] = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        cases = data.get("cases") if isinstance(data, dict) else data
        if not isinstance(cases, list):
            raise SystemExit(f"{path.name}: neither {{\"cases\": [...]}} nor an array of cases")
        found.extend((path.name, case) for case in cases)
    return found


def run_case(ops: Operations, table: Dict[str, Callable[..., Any]], case: Any) -> None:
    if not isinstance(case, dict):
        raise CaseFailure("a case must be an object")
    expect = case.get("expect")
    if not isinstance(expect, dict) or ("ok" in expect) == ("error" in expect):
        raise CaseFailure("expect must hold exactly one of ok and error")
    operation = case.get("operation")
    if operation not in table:
        raise CaseFailure(f"unknown operation {operation!r}")
    try:
        result = table[operation](case.get("input") or {})
    except CaseFailure:
        raise
    except Exception as e:  # noqa: BLE001 - every failure of the SDK is a case failure
        if "ok" in expect:
            raise CaseFailure(f"expected ok, got {type(e).__name__}: {e}") from None
        check_error(ops.sdk, expect["error"], e)
    else:
        if "error" in expect:
            raise CaseFailure(f"expected {show(expect['error'])}, got ok {show(plain(result))}")
        check_ok(expect["ok"], result)
    requests = expect.get("requests", case.get("requests"))
    if requests is not None and operation == "redeem_claim" and "url" not in case["input"].get("gateway", {}):
        check_requests(requests, ops.recorded_requests())


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True, type=Path, help="a directory of case files")
    parser.add_argument("--installed", action="store_true",
                        help="import the installed ankusa instead of sdk/python/src")
    args = parser.parse_args(argv)
    sdk = _import_sdk(args.installed)
    if not args.cases.is_dir():
        print(f"runner: {args.cases} is not a directory", file=sys.stderr)
        return 2
    cases = load_cases(args.cases)
    ops = Operations(sdk)
    table = ops.table()
    passed = failed = 0
    try:
        for file_name, case in cases:
            case_id = case.get("id", "?") if isinstance(case, dict) else "?"
            try:
                run_case(ops, table, case)
                passed += 1
            except CaseFailure as e:
                failed += 1
                print(f"FAIL {file_name} {case_id}: {e}")
    finally:
        ops.close()
    print(f"{passed} passed, {failed} failed")
    if not cases:
        print(f"runner: no case in {args.cases}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
