#!/bin/sh
test_description='snapshots (gpuckpt -R): the tree stopped only for what must be consistent'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
mounted=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	for m in $mounted; do umount "$m" 2>/dev/null; done
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# gap: the longest pause the workload saw since its check before,
# from its last answer, in ms.
gap() {
	grep '^verify ok' "$WSTATUS" | tail -n 1 | sed 's/.* gap=\([0-9]*\)$/\1/'
}

# ms: now, in milliseconds.
ms() {
	python3 -c 'import time; print(int(time.monotonic() * 1000))'
}

# stopped FILE: the time gpuckpt -v says the tree was stopped, in ms.
stopped() {
	sed -n 's/^gpuckpt: process tree [0-9]* ran again after \([0-9]*\) ms stopped$/\1/p' "$1"
}

# tmpfs_at DIR MiB: a tmpfs of that size on DIR, unmounted at the end.
tmpfs_at() {
	mkdir -p "$1" && mount -t tmpfs -o size="$2"m gck-test "$1" &&
	mounted="$mounted $(pwd)/$1"
}

test_expect_success 'a workload that keeps rewriting 5% of its memory a second' '
	start w -m 128 -w 5 &&
	verify_workload $WPID &&
	C0=$VCOUNTER
'

test_expect_success 'a snapshot stops it for a small part of its time; it counts on' '
	t0=$(ms) &&
	test_status 0 "$GCKPT" -v -R -c zstd:12 -p $WPID -o s1.gck 2>err &&
	t1=$(ms) &&
	verify_workload $WPID &&
	g=$(gap) && s=$(stopped err) &&
	echo "gpuckpt took $((t1 - t0)) ms; stopped $s ms by its count, $g ms by the workload'"'"'s" &&
	test -n "$g" && test -n "$s" &&
	test $VCOUNTER -gt $C0 &&
	test $((g * 3)) -lt $((t1 - t0)) &&
	test $((s * 3)) -lt $((t1 - t0)) &&
	test_grep "^gpuckpt: round 1: " err &&
	# the rounds, then the stop, then the image
	awk "/^gpuckpt: pre-copy ended/ { r = NR } /^gpuckpt: dumping/ { d = NR }
	    / ran again after / { a = NR } /^gpuckpt: writing image\$/ { w = NR }
	    END { exit !(r && r < d && d < a && a < w) }" err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'the snapshot verifies and restores as it was when stopped' '
	test_status 0 "$GCKINSPECT" --verify s1.gck &&
	zstd -dc s1.gck | tar -xOf - gpuckpt.json >s1.json &&
	python3 - s1.json <<-\EOF &&
	import json, sys
	m = json.load(open(sys.argv[1]))
	assert "parent" not in m, m.get("parent")
	assert m["options"]["level"] == 12, m["options"]
	EOF
	C1=$VCOUNTER &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" s1.gck >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $C0
'

test_expect_success '--parent: a snapshot stores only what changed since' '
	verify_workload $WPID && C2=$VCOUNTER &&
	test_status 0 "$GCKPT" -R --parent=s1.gck -p $WPID -o s2.gck 2>err &&
	test_must_be_empty err &&
	a=$(stat -c %s s1.gck) && b=$(stat -c %s s2.gck) &&
	echo "s1 $a bytes, s2 $b bytes" &&
	test $((b * 2)) -lt $a &&
	test_status 1 "$GCKINSPECT" --verify s2.gck 2>err &&
	test_grep "needs its parent image" err &&
	test_status 0 "$GCKINSPECT" --verify --parent=s1.gck s2.gck &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" --parent=s1.gck s2.gck >out &&
	verify_workload $WPID &&
	test $VCOUNTER -ge $C2
'

test_expect_success 'to a pipe, signed: the stream verifies' '
	ssh-keygen -q -t ed25519 -N "" -C snap -f key &&
	printf "snap %s\n" "$(cut -d" " -f1,2 key.pub)" >allowed &&
	"$GCKPT" -R --sign=key -p $WPID | cat >s3.gck &&
	test_status 0 "$GCKINSPECT" --verify --allowed-signers=allowed \
	    s3.gck >out &&
	test_grep "^signed by snap, ED25519 key SHA256:" out &&
	verify_workload $WPID
'

test_expect_success 'no room for the image once the tree runs again: it runs on, nothing left' '
	tmpfs_at small 8 &&
	test_status 1 "$GCKPT" -v -R -p $WPID -o small/s4.gck 2>err &&
	test_grep " ran again after " err &&
	test_grep "^gpuckpt: .*No space left on device.*; process tree $WPID left running\$" err &&
	test -z "$(ls -A small)" &&
	test -z "$(ls -A "$TMPDIR")" &&
	verify_workload $WPID
'

test_expect_success 'no room for the rounds: the tree was never stopped, nothing left' '
	tmpfs_at work 16 &&
	verify_workload $WPID &&
	test_status 1 env TMPDIR=$(pwd)/work "$GCKPT" -v -R -p $WPID \
	    -o s5.gck 2>err &&
	! grep -q "^gpuckpt: dumping" err &&
	test_grep "^gpuckpt: .*No space left on device.*; process tree $WPID left running\$" err &&
	test -z "$(ls -A work)" &&
	! test -e s5.gck &&
	verify_workload $WPID &&
	test $(gap) -lt 1000
'

test_expect_success 'pages rewritten here and there: given a parent, the image is written reading only the pages it lacks' '
	start p -m 64 -w 5 -p pages &&
	verify_workload $WPID && C3=$VCOUNTER &&
	test_status 0 "$GCKPT" -R -p $WPID -o p1.gck &&
	sleep 1 &&
	test_status 0 "$GCKPT" -v -R --parent=p1.gck -p $WPID -o p2.gck \
	    2>err &&
	line=$(sed -n "s/^gpuckpt: image: of \([0-9]*\) bytes of memory, \([0-9]*\) read back from the rounds; \([0-9]*\) written from the digests of their pages\$/\1 \2 \3/p" err) &&
	echo "memory, read, from digests: $line" &&
	set -- $line && test $# = 3 &&
	# some 5% of the pages a second, and the rounds take well under a
	# second: most chunks are patches, read only for their new pages
	test $(($2 * 4)) -lt $1 &&
	test $(($3 * 2)) -gt $1 &&
	test_status 0 "$GCKINSPECT" --verify --parent=p1.gck p2.gck &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" --parent=p1.gck p2.gck >out &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $C3
'

test_done
