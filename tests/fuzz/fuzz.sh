#!/bin/sh
#
# fuzz.sh: `make fuzz'.  Builds the libFuzzer targets of this directory
# with $FUZZ_CC, the library compiled again with the fuzzer's coverage
# and ASan and UBSan into $FUZZ_BUILD (the normal build is untouched),
# then runs each target of $FUZZ_TARGETS for $FUZZ_SECONDS seconds on a
# scratch copy of its seed corpus, corpus/TARGET.  Any crash, leak,
# sanitizer report, timeout or running out of memory fails it.
#
# The Makefile passes: FUZZ_CC HAVE_LIBFUZZER FUZZ_CPPFLAGS FUZZ_LIBS
# FUZZ_SOURCES (the library's sources, as automake lists them)
# FUZZ_SRCDIR FUZZ_BUILDDIR FUZZ_BUILD FUZZ_TARGETS FUZZ_SECONDS.
#
# shellcheck disable=SC3013	# test -nt: dash, bash and busybox have it
set -u

me=fuzz
die()
{
	echo "make fuzz: $*" >&2
	exit 1
}

if [ "${HAVE_LIBFUZZER:-no}" != yes ]; then
	die "no C compiler that links -fsanitize=fuzzer was found" \
	    "(FUZZ_CC=${FUZZ_CC:-}): install clang (scripts/install-deps does)" \
	    "and run configure again, or pass FUZZ_CC to configure"
fi
command -v "${FUZZ_CC%% *}" >/dev/null 2>&1 || die "$FUZZ_CC not found"

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION: the library takes any digest.
cflags="-g -O1 -fno-omit-frame-pointer $san"
cflags="$cflags -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION"
mkdir -p "$FUZZ_BUILD/obj" || exit 1

# The library: what changed since the last build (this script's flags
# included), on every core.
headers=$(ls "$FUZZ_SRCDIR"/src/lib/*.h "$FUZZ_SRCDIR"/src/lib/*/*.h "$FUZZ_BUILDDIR"/src/lib/*/*.h \
    "$FUZZ_BUILDDIR"/config.h "$0" 2>/dev/null)
objs=
todo=
for s in $FUZZ_SOURCES; do
	case $s in
	*.c) ;;
	*) continue ;;
	esac
	if [ -f "$FUZZ_BUILDDIR/$s" ]; then
		src=$FUZZ_BUILDDIR/$s
	else
		src=$FUZZ_SRCDIR/$s
	fi
	o=$FUZZ_BUILD/obj/$(basename "$s" .c).o
	objs="$objs $o"
	stale=
	[ -f "$o" ] || stale=1
	for h in "$src" $headers; do
		[ -n "$stale" ] && break
		[ "$h" -nt "$o" ] && stale=1
	done
	[ -n "$stale" ] && todo="$todo $src:$o"
done
if [ -n "$todo" ]; then
	echo "  FUZZCC   the library"
	# shellcheck disable=SC2016,SC2086
	printf '%s\n' $todo | xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} \
	    sh -c 'f={}; exec $0 $1 -fsanitize=fuzzer-no-link $2 -c \
		-o "${f#*:}" "${f%%:*}"' \
	    "$FUZZ_CC" "$cflags" "$FUZZ_CPPFLAGS" || die "cannot build the library"
fi

# The targets, and mkimage (for mkcorpus.py: not a fuzzer, but built
# with the same objects).
for t in $FUZZ_TARGETS mkimage; do
	if [ "$t" = mkimage ]; then
		bin=$FUZZ_BUILD/mkimage
		src=$FUZZ_SRCDIR/tests/fuzz/mkimage.c
		ldflags=
	else
		bin=$FUZZ_BUILD/fuzz_$t
		src=$FUZZ_SRCDIR/tests/fuzz/fuzz_$t.c
		ldflags=-fsanitize=fuzzer
	fi
	[ -f "$src" ] || die "no target '$t' ($src)"
	stale=
	[ -f "$bin" ] || stale=1
	for h in "$src" "$FUZZ_SRCDIR/tests/fuzz/fuzz.h" $objs; do
		[ -n "$stale" ] && break
		[ "$h" -nt "$bin" ] && stale=1
	done
	[ -n "$stale" ] || continue
	echo "  FUZZLD   $(basename "$bin")"
	# FUZZ_DATADIR: where a target finds what it reads besides its input.
	# shellcheck disable=SC2086
	$FUZZ_CC $cflags $ldflags $FUZZ_CPPFLAGS \
	    -DFUZZ_DATADIR="\"$FUZZ_SRCDIR/tests/fuzz\"" -o "$bin" "$src" $objs \
	    $FUZZ_LIBS || die "cannot build $(basename "$bin")"
done

[ "${FUZZ_SECONDS:-60}" -gt 0 ] 2>/dev/null || exit 0

# Each target: its input size bound, and the run.
max_len()
{
	case $1 in
	frame) echo 4096 ;;
	manifest) echo 16384 ;;
	stream | recv) echo 131072 ;;
	sig) echo 16400 ;;
	*) echo 65536 ;;
	esac
}

ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}
export ASAN_OPTIONS UBSAN_OPTIONS

status=0
for t in $FUZZ_TARGETS; do
	work=$FUZZ_BUILD/run-$t
	rm -rf "$work"
	mkdir -p "$work/corpus" || exit 1
	if [ -d "$FUZZ_SRCDIR/tests/fuzz/corpus/$t" ]; then
		cp "$FUZZ_SRCDIR/tests/fuzz/corpus/$t"/* "$work/corpus/" \
		    2>/dev/null
	fi
	chmod -R u+w "$work"
	# What the targets write goes to memory where it can.
	tmp=$(mktemp -d /dev/shm/gck-fuzz.XXXXXX 2>/dev/null) || tmp=$work
	echo "  FUZZ     fuzz_$t for ${FUZZ_SECONDS}s"
	TMPDIR=$tmp "$FUZZ_BUILD/fuzz_$t" -max_total_time="$FUZZ_SECONDS" \
	    -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
	    -malloc_limit_mb=2048 -error_exitcode=77 -timeout_exitcode=78 \
	    -dict="$FUZZ_SRCDIR/tests/fuzz/fuzz.dict" \
	    -artifact_prefix="$work/" -print_final_stats=1 \
	    "$work/corpus" >"$work/log" 2>&1
	r=$?
	[ "$tmp" = "$work" ] || rm -rf "$tmp"
	if [ "$r" != 0 ]; then
		tail -n 60 "$work/log" >&2
		echo "$me: fuzz_$t failed (exit $r): the input that did it" \
		    "is in $work/ (crash-*, leak-*, timeout-*, oom-*)" >&2
		status=1
		continue
	fi
	grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units)' \
	    "$work/log" | sed 's/^/    /'
done
exit $status
