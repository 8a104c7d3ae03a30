#!/usr/bin/env bash
# test/pg/check-symbols.sh LIBRARY POSTGRES
#
# Whether the server binary POSTGRES can load LIBRARY: every symbol the
# library imports (an undefined, non-weak dynamic symbol) must be exported
# by POSTGRES, by a shared library POSTGRES links (libc, libm, ... as ldd
# finds them for it), or by one the library links itself.  A library built
# against headers of a newer minor than the server's can import a function
# or variable the server does not have; dlopen then fails at CREATE
# EXTENSION or at the first call ("undefined symbol").  This finds that
# before a cluster starts.  Prints what it checked; exit status 1, with the
# missing names, when any is missing.
set -euo pipefail

library=${1:?usage: check-symbols.sh LIBRARY POSTGRES}
postgres=${2:?usage: check-symbols.sh LIBRARY POSTGRES}
[ -f "$library" ] || { echo "check-symbols.sh: no $library" >&2; exit 2; }
[ -x "$postgres" ] || { echo "check-symbols.sh: no $postgres" >&2; exit 2; }

# name without its symbol version (memcpy@GLIBC_2.14 -> memcpy)
strip_version() { sed 's/@.*//' | sort -u; }

# the shared libraries ldd resolves for a binary: "name => /path (addr)"
linked() {
	ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
}

mapfile -t libraries < <({ linked "$postgres"; linked "$library"; } | sort -u)
if ldd "$postgres" "$library" | grep -q 'not found'; then
	echo "check-symbols.sh: a library is missing:" >&2
	ldd "$postgres" "$library" | grep 'not found' >&2
	exit 1
fi

imported=$(nm -D --undefined-only "$library" | awk '$1 == "U" { print $2 }' | strip_version)
from_postgres=$(nm -D --defined-only "$postgres" | awk 'NF >= 3 { print $3 }' | strip_version)
from_libraries=$(for lib in "${libraries[@]}"; do nm -D --defined-only "$lib"; done |
	awk 'NF >= 3 { print $3 }' | strip_version)

in_postgres=$(comm -12 <(echo "$imported") <(echo "$from_postgres") | grep -c . || true)
elsewhere=$(comm -23 <(echo "$imported") <(echo "$from_postgres"))
missing=$(comm -23 <(echo "$elsewhere") <(echo "$from_libraries") | grep . || true)
total=$(echo "$imported" | grep -c . || true)

if [ -n "$missing" ]; then
	echo "$(basename "$library") imports $(echo "$missing" | wc -l) of its $total symbols from nothing $(basename "$postgres") loads:"
	echo "$missing" | sed 's/^/  /'
	exit 1
fi
echo "$(basename "$library") imports $total symbols: $in_postgres from $("$postgres" --version | sed 's/^postgres (PostgreSQL) /postgres /'), $((total - in_postgres)) from its shared libraries (${#libraries[@]}: $(for lib in "${libraries[@]}"; do basename "$lib"; done | sort -u | tr '\n' ' ' | sed 's/ $//')); none missing"
