#!/bin/sh
test_description='images encrypted with age(1), a stage of the pipe'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
command -v age >/dev/null && command -v age-keygen >/dev/null ||
    test_skip_all "age or age-keygen not found"

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
	WSTART=$(proc_field $WPID 22)
}

# restore_there IDENTITY: a script for elsewhere that decrypts standard
# input with the age identity file IDENTITY, restores it with
# gpurestore, and has the restored workload check itself; its answer
# goes to there.verify.
restore_there() {
	cat <<-EOF
	{ age -d -i "$TRASH/$1" 2>age.err; echo \$? >age.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	echo \$? >rs.st
	test "\$(cat rs.st)" = 0 || exit 0
	n=\$(grep -c '^verify ' "$WSTATUS")
	kill -USR1 \$(cat rs.out)
	i=0
	while test "\$(grep -c '^verify ' "$WSTATUS")" -le \$n &&
	    test \$i -lt 100; do
		i=\$((i + 1))
		sleep 0.1
	done
	test "\$(grep -c '^verify ' "$WSTATUS")" -gt \$n &&
	    grep '^verify ' "$WSTATUS" | tail -n 1 >there.verify
	EOF
}

# counter_of LINE: the counter of a workload's "verify ok" line.
counter_of() {
	echo "$1" | sed -n 's/^verify ok .* counter=\([0-9]*\) .*/\1/p'
}

# strays: the processes under the tests' subreaper, other than this
# shell and what it runs, one PID a line, sorted: those it detached (the
# workloads) and any that a restore left behind.
strays() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$GCK_REAPER" -v me=$$ '
	{ pid = $1; sub(/.*\) /, ""); state[pid] = $1; parent[pid] = $2 }
	END {
		n = 1; q[1] = root
		for (i = 1; i <= n; i++)
			for (p in parent)
				if (parent[p] == q[i] && p != me) {
					q[++n] = p
					if (state[p] != "Z")
						print p
				}
	}' | sort -n
}

# untouched: after a restore that failed, the image's source is as
# gpuckpt left it (the same processes, stopped), nothing else runs under
# the subreaper (no restored process, no criu), and no work file is left.
untouched() {
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WCHILD 3)" = T &&
	printf '%s\n' $WPID $WCHILD | sort -n >strays.expect &&
	strays >strays.actual &&
	test_cmp strays.expect strays.actual &&
	test -z "$(ls -A "$TMPDIR")"
}

# resume_as_told ERR: runs the 'kill -CONT ...' that gpuckpt's note in
# ERR gives.
resume_as_told() {
	_cmd=$(sed -n "s/.*resume it with '\\(kill -CONT[0-9 ]*\\)'.*/\\1/p" "$1")
	test -n "$_cmd" || { echo >&2 "no resume command in $1"; return 1; }
	$_cmd
}

test_expect_success 'two age identities, and a workload' '
	age-keygen -o key.txt 2>err &&
	test_grep "^Public key: age1" err &&
	age-keygen -y key.txt >recipient &&
	test_line_count recipient 1 &&
	test_grep "^age1[a-z0-9]*\$" recipient &&
	age-keygen -o other.txt 2>/dev/null &&
	! cmp -s key.txt other.txt &&
	start enc -m 32 &&
	verify_workload $WPID &&
	before=$VCOUNTER
'

test_expect_success 'gpuckpt | age -r | (elsewhere) age -d | gpurestore' '
	restore_there key.txt >there.sh &&
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    age -r "$(cat recipient)" |
	    elsewhere "$(cat there.sh)" &&
	test "$(cat age.st)" = 0 &&
	test_must_be_empty age.err &&
	test "$(cat rs.st)" = 0 &&
	test_must_be_empty rs.err &&
	test "$(cat rs.out)" = "$WPID" &&
	# the restored copy went on from where its image was taken
	test_grep "^verify ok sum=$WSUM .* child=$WCHILD gap=[0-9]*\$" there.verify &&
	test "$(counter_of "$(cat there.verify)")" -gt "$before" &&
	# age, not gpurestore, read the pipe: the source waits, stopped
	test "$(cat ck.st)" = 0 &&
	test_line_count ck.err 1 &&
	test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe" ck.err &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	resume_as_told ck.err &&
	verify_workload $WPID &&
	before=$VCOUNTER
'

test_expect_success 'gpuckpt | age -r >FILE: the image at rest is ciphertext' '
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    age -r "$(cat recipient)" >job.gck.age &&
	test "$(cat ck.st)" = 0 &&
	test_line_count ck.err 1 &&
	test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe" ck.err &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(head -n 1 job.gck.age)" = age-encryption.org/v1 &&
	test "$(sed -n "2s/^-> X25519 .*/x25519/p" job.gck.age)" = x25519 &&
	! LC_ALL=C grep -a -q -e gpuckpt -e ustar -e criu/ -e workload \
	    job.gck.age &&
	# what it hides: in clear, the image begins with zstd magic, names
	# its entries and digests, and verifies
	age -d -i key.txt job.gck.age >clear.gck &&
	test "$(head -c 4 clear.gck | od -An -tx1 | tr -d " ")" = 28b52ffd &&
	LC_ALL=C grep -a -q -e "criu/PaxHeader" clear.gck &&
	LC_ALL=C grep -a -q -e "gpuckpt.sha256=" clear.gck &&
	"$GCKINSPECT" --verify clear.gck >out &&
	test_grep "^image ok" out &&
	rm clear.gck
'

test_expect_success 'a copy with a byte of its middle changed' '
	cp job.gck.age bad.age &&
	at=$(($(wc -c <bad.age) / 2)) &&
	# (a byte of any value: printf would take some for escapes)
	python3 -c "import sys
f = open(sys.argv[1], \"r+b\")
f.seek(int(sys.argv[2]))
b = f.read(1)[0]
f.seek(int(sys.argv[2]))
f.write(bytes([b ^ 1]))" bad.age $at &&
	{ cmp -l job.gck.age bad.age >diffs; test $? = 1; } &&
	test_line_count diffs 1 &&
	test "$(awk "{ print \$1 }" diffs)" = $((at + 1)) &&
	test "$(wc -c <bad.age)" = "$(wc -c <job.gck.age)"
'

test_expect_success 'the changed ciphertext: age -d refuses it, nothing restored' '
	{ age -d -i key.txt bad.age 2>age.err; echo $? >age.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	test "$(cat age.st)" = 1 &&
	test_grep "^age: error: .*failed to decrypt and authenticate payload chunk" age.err &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: image truncated .*; nothing restored: its source, process tree $WPID, is left stopped on this host\$" rs.err &&
	untouched
'

test_expect_success 'another identity: age -d cannot decrypt, nothing restored' '
	{ age -d -i other.txt job.gck.age 2>age.err; echo $? >age.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	test "$(cat age.st)" = 1 &&
	test_grep "^age: error: no identity matched any of the recipients" age.err &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: empty input: no image" rs.err &&
	untouched
'

test_expect_success 'age -d <FILE | gpurestore: the workload goes on' '
	{ age -d -i key.txt job.gck.age 2>age.err; echo $? >age.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err &&
	test "$(cat age.st)" = 0 &&
	test_must_be_empty age.err &&
	test_must_be_empty rs.err &&
	echo $WPID >expect &&
	test_cmp expect rs.out &&
	# a restored copy, not the stopped source resumed
	test "$(proc_field $WPID 22)" != "$WSTART" &&
	verify_workload $WPID &&
	test "$VCOUNTER" -gt "$before" &&
	c=$VCOUNTER &&
	sleep 0.5 &&
	verify_workload $WPID &&
	test "$VCOUNTER" -gt "$c"
'

test_expect_success 'nothing left in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
