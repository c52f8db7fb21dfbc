#!/usr/bin/env bash
# hack/fuzz.sh — run Engram's Go fuzz targets one after the other.
#
#   hack/fuzz.sh [FUZZTIME]   fuzz every target for FUZZTIME (default 60s)
#   hack/fuzz.sh list         print the targets ("package FuzzName")
#   hack/fuzz.sh check        fail unless TARGETS lists exactly the Fuzz
#                             functions of the code (none forgotten)
#
# FUZZ_MATCH=REGEX runs only the targets whose "package FuzzName" matches.
# A target that finds a failure writes the input to the package's
# testdata/fuzz/<FuzzName>/ (Go's corpus format), where plain `go test` —
# and so `make test` — replays it from then on; commit it with the fix.
# The seed corpora live in the same directories.
#
# `go test -fuzz` runs one target of one package at a time, hence the loop.
set -euo pipefail
cd "$(dirname "$0")/.."

# The targets: one line each, package and function. Keep in step with the
# code (`hack/fuzz.sh check`, run by `make fuzz`, says when not).
TARGETS="
./internal/memory/policy FuzzParseDuration
./internal/memory/policy FuzzDurationString
./internal/memory FuzzValidID
./internal/memory FuzzValidScopeID
./internal/memory/textguard FuzzRedact
./internal/memory/textguard FuzzRedactSeeded
./internal/memory/textguard FuzzNormalizeForGuard
./internal/memory/textguard FuzzDetectInjection
./internal/memory/textguard FuzzSanitizeForPrompt
./internal/memory/textguard FuzzNeutralizeStructure
./internal/memory FuzzPrepareAdd
./internal/memory FuzzPolicyJSON
./internal/server FuzzDecodeBody
./internal/server FuzzQuery
./internal/server FuzzBearer
./internal/server FuzzRequestPath
./internal/auth FuzzParseTokens
./internal/auth FuzzTokenLine
./internal/auth FuzzVerify
./internal/auth FuzzMintVerify
./internal/auth FuzzParseSigningKeys
./internal/controller FuzzResolvePolicy
./internal/tenant FuzzConnectionURL
./internal/tenant FuzzLoginURL
"

targets() { echo "$TARGETS" | sed '/^\s*$/d'; }

in_code() {
	grep -rhoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' internal cmd test 2>/dev/null |
		sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/' | sort
}

case "${1:-}" in
list)
	targets
	exit 0
	;;
check)
	listed=$(targets | awk '{print $2}' | sort)
	if ! diff <(echo "$listed") <(in_code) >/dev/null; then
		echo "hack/fuzz.sh: TARGETS and the Fuzz functions of the code differ (< listed, > in the code):" >&2
		diff <(echo "$listed") <(in_code) >&2 || true
		exit 1
	fi
	echo "hack/fuzz.sh: $(targets | wc -l) targets, all listed"
	exit 0
	;;
esac

FUZZTIME="${1:-${FUZZTIME:-60s}}"
failed=()
summary=()
while read -r pkg name; do
	if [ -n "${FUZZ_MATCH:-}" ] && ! [[ "$pkg $name" =~ $FUZZ_MATCH ]]; then
		continue
	fi
	echo ">> $pkg $name for $FUZZTIME"
	log=$(mktemp)
	if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$pkg" 2>&1 | tee "$log" | grep -vE '^fuzz: elapsed: [0-9]+s, (execs|gathering)'; then
		:
	fi
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | awk '{print $2}')
	if grep -qE '^(--- FAIL|FAIL)' "$log"; then
		failed+=("$pkg $name")
		if input=$(grep -oE 'testdata/fuzz/[^ ]+' "$log" | head -1) && [ -n "$input" ]; then
			summary+=("FAIL  $pkg $name (${execs:-0} execs; failing input $pkg/$input)")
		else
			# No input: the fuzzing engine itself failed (e.g. "context
			# deadline exceeded" when a loaded machine starves a worker).
			summary+=("FAIL  $pkg $name (${execs:-0} execs; no failing input written: see the output above, rerun)")
		fi
	else
		summary+=("ok    $pkg $name (${execs:-0} execs)")
	fi
	rm -f "$log"
done < <(targets)

echo
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "hack/fuzz.sh: ${#failed[@]} target(s) found a failure" >&2
	exit 1
fi
