#!/bin/sh
# sancheck.sh TEST [ARG...] -- make check's wrapper of every test under
# configure --enable-sanitizers (tests/Makefile.am).
#
# Runs TEST with the sanitizers' reports (ASAN_OPTIONS, UBSAN_OPTIONS)
# written to files in a directory of its own, $GCK_SANROOT/NAME, where
# they neither add lines to a stderr that a test counts nor go unseen.
# Many tests expect a command to fail, and a sanitizer's abort must not
# pass for that failure: if any report is there once TEST has exited,
# it is shown in the test's log and the test fails ("Bail out!"),
# whatever TEST's own status was.  lib.sh's test_done also fails a script that
# left reports; this catches the units and anything after test_done.

for last; do :; done
GCK_SANDIR=$GCK_SANROOT/${last##*/}
rm -rf "$GCK_SANDIR" && mkdir -p "$GCK_SANDIR" || exit 99
ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$GCK_SANDIR/asan"
UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$GCK_SANDIR/ubsan"
export GCK_SANDIR ASAN_OPTIONS UBSAN_OPTIONS

"$@"
st=$?
# LeakSanitizer's note that a thread went while it scanned (lib.sh's
# san_benign()) is no finding.
for f in "$GCK_SANDIR"/*; do
	test -f "$f" || continue
	grep -qv '^==[0-9]*==Unable to get registers from thread [0-9]*\.$' \
	    "$f" || rm -f "$f"
done
if test -n "$(ls -A "$GCK_SANDIR")"; then
	for f in "$GCK_SANDIR"/*; do
		echo "sancheck: sanitizer report $f:"
		cat "$f"
	done >&2
	echo "Bail out! sanitizer report(s) in $GCK_SANDIR"
	exit 99
fi
rmdir "$GCK_SANDIR"
exit $st
