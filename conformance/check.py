#!/usr/bin/env python3
"""Checks the conformance suite's own shape: every case names a known operation and feature,
ids are unique, `expect` holds exactly one of ok/error, every feature and every operation has
at least one case, and the hand-designed files are what conformance/gen/cases.py writes.

    python3 conformance/check.py [--cases DIR]
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(dirpath: Path):
    files = sorted(dirpath.glob("*.json"))
    for f in files:
        doc = json.loads(f.read_text())
        cases = doc if isinstance(doc, list) else doc.get("cases")
        if not isinstance(cases, list):
            yield f.name, None
            continue
        for c in cases:
            yield f.name, c


def main() -> int:
    cases_dir = HERE / "cases"
    if "--cases" in sys.argv:
        cases_dir = Path(sys.argv[sys.argv.index("--cases") + 1])
    features = json.loads((HERE / "features.json").read_text())
    known_ops = set(features["operations"])
    known_features = {f["id"] for f in features["features"]}
    problems, seen, used_features, used_ops, n = [], set(), set(), set(), 0
    for name, c in load(cases_dir):
        if c is None:
            problems.append(f"{name}: not a list of cases nor {{\"cases\": [...]}}")
            continue
        n += 1
        cid = c.get("id")
        where = f"{name} {cid}"
        if not isinstance(cid, str) or not cid:
            problems.append(f"{name}: a case without an id")
        elif cid in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(cid)
        if c.get("operation") not in known_ops:
            problems.append(f"{where}: unknown operation {c.get('operation')!r}")
        if c.get("feature") not in known_features:
            problems.append(f"{where}: unknown feature {c.get('feature')!r}")
        expect = c.get("expect", {})
        if ("ok" in expect) == ("error" in expect):
            problems.append(f"{where}: expect needs exactly one of ok and error")
        if "error" in expect and not {"class", "code", "retryable"} <= set(expect["error"]):
            problems.append(f"{where}: an error expectation names class, code and retryable")
        if not isinstance(c.get("input"), dict):
            problems.append(f"{where}: input is not an object")
        used_features.add(c.get("feature"))
        used_ops.add(c.get("operation"))
    for f in sorted(known_features - used_features):
        problems.append(f"feature {f} has no case")
    for o in sorted(known_ops - used_ops):
        problems.append(f"operation {o} has no case")
    if cases_dir == HERE / "cases":
        gen = subprocess.run([sys.executable, str(HERE / "gen" / "cases.py"), "--check"])
        if gen.returncode != 0:
            problems.append("the case files differ from conformance/gen/cases.py's output")
    for p in problems:
        print("conformance/check:", p, file=sys.stderr)
    print(f"{n} cases, {len(used_features)} features, {len(used_ops)} operations, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
