#!/usr/bin/env bash
# The lint gate (make lint; make test and make test-short run it): fails
# with the findings of
#   - staticcheck's default checks (staticcheck.conf), U1000 (unused code)
#     among them, over every package and the programs under testdata/;
#   - deadcode -test: exported functions and methods that no command, no
#     test and no testdata program reaches. Remove them, or test them where
#     they are the API a caller outside this module needs.
# Exclusions are //lint:ignore CHECK REASON comments at the code they
# excuse (staticcheck), or a pattern in dead_ok below with why (deadcode).
# The pinned tools come from ci/deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(bash ci/deps.sh lint-tools)

# go list's ./... leaves testdata/ out, but the tests build these programs
# (a directory with a go.mod of its own is another module: left out).
progs=()
while IFS= read -r d; do
	progs+=("./$d")
done < <(find . -path '*/testdata/*' -name '*.go' -print0 | xargs -0 grep -l '^package main$' |
	xargs -r -n1 dirname | sed 's|^\./||' | sort -u |
	while IFS= read -r d; do
		p=$d
		while [ "$p" != . ] && [ ! -e "$p/go.mod" ]; do p=$(dirname "$p"); done
		[ "$p" = . ] && echo "$d"
	done)

# deadcode findings that stay, one extended regexp each, with why.
dead_ok=(
)

fail=0
if ! "$tools/staticcheck" ./... "${progs[@]}"; then
	echo "lint: staticcheck found the above" >&2
	fail=1
fi
dead=$("$tools/deadcode" -test ./... "${progs[@]}")
for re in "${dead_ok[@]}"; do
	dead=$(grep -Ev -- "$re" <<<"$dead" || true)
done
if [ -n "$dead" ]; then
	echo "$dead"
	echo "lint: deadcode: no command, test or testdata program calls the above: remove them, or test them" >&2
	fail=1
fi
exit $fail
