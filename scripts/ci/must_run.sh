#!/usr/bin/env bash
# Runs a test folder that must run in full (a real service's tests): prints how many ran,
# skipped and failed (and each step over 5 s), and fails when any skipped or none ran, so a silent
# skip shows in CI.
#   scripts/ci/must_run.sh LABEL PYTHON PYTEST_ARGS...
# Exit status: pytest's, or 1 when it passed but a test skipped or none ran.
set -uo pipefail
label=${1:?usage: must_run.sh LABEL PYTHON PYTEST_ARGS...}
py=${2:?usage: must_run.sh LABEL PYTHON PYTEST_ARGS...}
shift 2
t1=$SECONDS
xml="$(mktemp)"
"$py" -m pytest -q -p no:cacheprovider --durations=0 --durations-min=5 --junitxml="$xml" "$@"
rc=$?
counts="$("$py" - "$xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

try:
    s = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 0 0")
    raise SystemExit
s = s if s.tag == "testsuite" else s.find("testsuite")
n, sk = int(s.get("tests", 0)), int(s.get("skipped", 0))
print(n - sk, sk, int(s.get("failures", 0)) + int(s.get("errors", 0)))
PY
)"
rm -f "$xml"
read -r ran skipped bad <<<"$counts"
echo "$label tests: $ran ran, $skipped skipped, $bad failed, in $((SECONDS - t1)) s"
if [ "$rc" -eq 0 ] && { [ "$ran" -eq 0 ] || [ "$skipped" -gt 0 ]; }; then
  echo "$label tests: every test must run here (none may skip)" >&2
  rc=1
fi
exit "$rc"
