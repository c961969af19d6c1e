#!/usr/bin/env bash
# Lists every comment (or any line of the tree) that still cites a numbered
# section of the outside contract ("SPEC 12") instead of the project's own
# reference pages in docs/, and fails if there is one. CI runs it as it is.
#
#   scripts/spec-citations.sh            list what is left; exit 1 if anything is
#   scripts/spec-citations.sh --rewrite  rewrite each citation in place first, changing
#                                        only the citation ("(SPEC 12)" becomes
#                                        "(docs/containment.md)", a link in Markdown),
#                                        then list what is left
#   scripts/spec-citations.sh --map      which page of docs/ each section became
#
# The work is done by scripts/speccite (a Go program): the map, the
# anchors picked from a line's wording, and the files left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
for a in "$@"; do
	case "$a" in
	--rewrite) args+=(-rewrite) ;;
	--map) args+=(-map) ;;
	*) echo "usage: $0 [--rewrite | --map]" >&2; exit 2 ;;
	esac
done
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/speccite" ./scripts/speccite
"$bin/speccite" "${args[@]}"
