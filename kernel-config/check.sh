#!/usr/bin/env bash
# Checks that every option set by the fragments is in the final .config with the
# same value. Options dropped by unmet dependencies are the usual failure.
#   kernel-config/check.sh FINAL_CONFIG FRAGMENT...
set -euo pipefail
final="$1"; shift
missing=0
for frag in "$@"; do
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) ;;
		"# CONFIG_"*" is not set")
			# an option the fragment turns off must not come back on through a select
			opt=${line#"# "}; opt=${opt%" is not set"}
			if grep -qE "^${opt}=" "$final"; then
				echo "kernel-config: $(basename "$frag"): wanted $opt off, final .config has: $(grep -E "^${opt}=" "$final")" >&2
				missing=1
			fi
			continue ;;
		*) continue ;;
		esac
		if ! grep -qxF "$line" "$final"; then
			got=$(grep -E "^(# )?${line%%=*}[= ]" "$final" || echo "absent")
			echo "kernel-config: $(basename "$frag"): wanted $line, final .config has: $got" >&2
			missing=1
		fi
	done < "$frag"
done
[ "$missing" = 0 ] || { echo "kernel-config: fix the fragment (a dependency is missing)" >&2; exit 1; }
