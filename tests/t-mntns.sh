#!/bin/sh
test_description='a job of a mount namespace of its own (pivot_root, as Apptainer and enroot start one): its mounts and outside files, and the rule on their sources'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_sshd
for _c in busybox unshare; do
	command -v $_c >/dev/null ||
	    test_skip_all "$_c not found (scripts/install-deps installs it)"
done
ldd "$(command -v busybox)" >/dev/null 2>&1 &&
    test_skip_all "busybox is not static (busybox-static)"

# The only allowed_signers a test means: none from the system.
GCK_ALLOWED_SIGNERS=$TRASH/no-such-file
export GCK_ALLOWED_SIGNERS

started=
test_cleanup() {
	for _p in $started; do
		kill -KILL $_p 2>/dev/null
	done
	:
}

# job NAME [etc]: starts, in a session of its own under the test's
# subreaper, a job in a mount namespace of its own: a root file system
# of busybox ($TRASH/NAME/root) made its / with pivot_root, the host's
# $TRASH/NAME/data bound at /data (and with "etc", the host's /etc at
# /etc, read-only), its own /proc; standard input the host's /dev/null,
# output the host's file $TRASH/NAME/log.  Its shell counts in its own
# memory, writes each count to the log and, by rename, to /data/count.
# Sets JPID, its PID, and JSTART, its start time.
job() {
	_d=$TRASH/$1
	mkdir -p "$_d/root/bin" "$_d/root/proc" "$_d/root/data" \
	    "$_d/root/etc" "$_d/root/old" "$_d/data" &&
	cp "$(command -v busybox)" "$_d/root/bin/busybox" &&
	for _a in sh sleep cat echo mv mount umount; do
		ln -sf busybox "$_d/root/bin/$_a" || return 1
	done &&
	{
		echo "exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-"
		echo "echo \$\$ >'$_d/pid'"
		echo "mount --bind '$_d/root' '$_d/root' &&"
		echo "mount --bind '$_d/data' '$_d/root/data' &&"
		test -z "$2" || echo "mount -o bind,ro /etc '$_d/root/etc' &&"
		echo "cd '$_d/root' && pivot_root . old &&"
		echo "/bin/mount -t proc proc /proc && /bin/umount -l /old &&"
		echo "exec /bin/sh -c 'i=0; while true; do i=\$((i+1));" \
		    "echo \$i >/data/count.new; mv /data/count.new /data/count;" \
		    "echo \$i; sleep 0.05; done'"
	} >"$_d/start" &&
	(setsid unshare -m sh "$_d/start" </dev/null >"$_d/log" 2>&1 &) &&
	wait_for_line "$_d/data/count" "^[0-9]" 30 &&
	JPID=$(cat "$_d/pid") && test -n "$JPID" &&
	started="$started $JPID" &&
	JSTART=$(proc_field $JPID 22)
}

# count NAME: the count job NAME wrote last.
count() {
	cat "$TRASH/$1/data/count"
}

# counted NAME: the log of job NAME holds 1, 2, 3... each once, in
# order: its count and its output's offset went on from the checkpoint.
counted() {
	awk 'int($0) != NR { print "line " NR ": " $0; bad = 1 }
	    END { exit bad || NR < 2 }' "$TRASH/$1/log"
}

# moves_on NAME: the count of job NAME goes up (within 10 s).
moves_on() {
	_c=$(count $1) && _i=0 &&
	while test "$(count $1)" = "$_c"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done
}

# pivoted PID NAME: PID's / is $TRASH/NAME/root, bound from here, with
# $TRASH/NAME/data at /data; its standard input is the host's
# /dev/null and its output $TRASH/NAME/log.
pivoted() {
	test "$(readlink /proc/$1/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" &&
	awk '$5 == "/" { print $4 }' /proc/$1/mountinfo >root &&
	echo "$TRASH/$2/root" >expect && test_cmp expect root &&
	awk '$5 == "/data" { print $4 }' /proc/$1/mountinfo >data &&
	echo "$TRASH/$2/data" >expect && test_cmp expect data &&
	test "$(readlink /proc/$1/fd/0)" = /dev/null &&
	test "$(readlink /proc/$1/fd/1)" = "$TRASH/$2/log" &&
	test "$(readlink /proc/$1/fd/2)" = "$TRASH/$2/log"
}

# refused FILE MESSAGE: FILE holds the one line "gpurestore: MESSAGE";
# nothing was restored and nothing is left in $TMPDIR.
refused() {
	echo "gpurestore: $2" >expect &&
	test_cmp expect "$1" &&
	proc_gone $JPID &&
	test -z "$(ls -A "$TMPDIR")"
}

# check_away: gpuinspect --check fails, naming the root file system of
# job j, which is not there.
check_away() {
	test_status 1 "$GCKINSPECT" --check j.gck >out 2>err &&
	test_grep "the root file system .$TRASH/j/root. of the tree.s mount namespace is missing here" err
}

test_expect_success 'the job runs pivoted into its own root, its stdio on the host' '
	job j &&
	pivoted $JPID j &&
	moves_on j
'

test_expect_success 'gpuckpt -p of the job: its mounts and outside files recorded' '
	test_status 0 "$GCKPT" -p $JPID -o j.gck 2>err &&
	wait_gone $JPID &&
	C1=$(count j) && sleep 0.3 && test "$(count j)" = "$C1" &&
	"$GCKINSPECT" j.gck >show &&
	test_grep "^root        $TRASH/j/root (a mount namespace of its own)\$" show &&
	test_grep "^mount       /data from $TRASH/j/data (" show &&
	test_grep "^outside     /dev/null on fd 0 of process $JPID\$" show &&
	test_grep "^outside     $TRASH/j/log on fd 1 of process $JPID\$" show &&
	test $(grep -c "^mount " show) = 1 && test $(grep -c "^outside " show) = 2
'

test_expect_success 'unsigned, without --root: refused, nothing runs' '
	test_status 1 "$GCKRESTORE" j.gck >out 2>err &&
	refused err "the image mounts '\''$TRASH/j/root'\'' of its host at '\''/'\'' in the job, and is not signed by a key that allowed_signers allows: name the source yourself (--root DIR)"
'

test_expect_success 'unsigned, --root but no --mount-map for /data: refused' '
	test_status 1 "$GCKRESTORE" --root "$TRASH/j/root" j.gck >out 2>err &&
	refused err "the image mounts '\''$TRASH/j/data'\'' of its host at '\''/data'\'' in the job, and is not signed by a key that allowed_signers allows: name the source yourself (--mount-map /data=DIR)"
'

test_expect_success 'a missing root file system: refused, and gpuinspect --check names it' '
	test_status 1 "$GCKRESTORE" --root "$TRASH/nowhere" -M /data="$TRASH/j/data" j.gck >out 2>err &&
	refused err "the job'\''s root file system '\''$TRASH/nowhere'\'' is missing here: No such file or directory (--root DIR says where it is)" &&
	test_status 0 "$GCKINSPECT" --check j.gck >out 2>err &&
	! test_grep "root file system" err &&
	mv "$TRASH/j/root" "$TRASH/j/root.away" &&
	check_away; _r=$?
	mv "$TRASH/j/root.away" "$TRASH/j/root" && return $_r
'

test_expect_success '--mount-map of a mount the image does not have: refused' '
	test_status 1 "$GCKRESTORE" --root "$TRASH/j/root" -M /data="$TRASH/j/data" -M /scratch=/tmp j.gck >out 2>err &&
	refused err "--mount-map '\''/scratch=/tmp'\'': the image has no mount from the host at '\''/scratch'\''"
'

test_expect_success 'restored with --root and --mount-map: its PID, its mounts, its files, its count' '
	test_status 0 "$GCKRESTORE" --root "$TRASH/j/root" -M /data="$TRASH/j/data" j.gck >out 2>err &&
	proc_restored $JPID $JSTART &&
	pivoted $JPID j &&
	moves_on j && test "$(count j)" -gt "$C1" &&
	counted j
'

test_expect_success 'checkpointed again, left running (-R), and restored in a PID namespace of its own' '
	test_status 0 "$GCKPT" -R -p $JPID -o j2.gck 2>err &&
	proc_running $JPID && moves_on j &&
	kill -KILL $JPID && wait_gone $JPID &&
	test_status 0 "$GCKRESTORE" --pidns --root "$TRASH/j/root" -M /data="$TRASH/j/data" -P pid j2.gck >out 2>err &&
	P2=$(cat pid) && proc_running $P2 &&
	test "$(readlink /proc/$P2/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	pivoted $P2 j && moves_on j &&
	kill -KILL $P2 && wait_gone $P2
'

test_expect_success 'an unsigned image naming the host'\''s /etc: refused, even with --root' '
	job e etc &&
	awk '\''$5 == "/etc" { print $4 }'\'' /proc/$JPID/mountinfo >etc &&
	echo /etc >expect && test_cmp expect etc &&
	test_status 0 "$GCKPT" -p $JPID -o e.gck 2>err &&
	wait_gone $JPID &&
	"$GCKINSPECT" e.gck >show.e &&
	test_grep "^mount       /etc from /etc (" show.e &&
	test_status 1 "$GCKRESTORE" --root "$TRASH/e/root" -M /data="$TRASH/e/data" e.gck >out 2>err &&
	refused err "the image mounts '\''/etc'\'' of its host at '\''/etc'\'' in the job, and is not signed by a key that allowed_signers allows: name the source yourself (--mount-map /etc=DIR)"
'

test_expect_success 'a signed image whose key allowed_signers allows: its own sources' '
	ssh-keygen -q -t ed25519 -N "" -C alice -f alice &&
	echo "alice $(cat alice.pub)" >allowed &&
	job s &&
	test_status 0 "$GCKPT" --sign=alice -p $JPID -o s.gck 2>err &&
	wait_gone $JPID &&
	test_status 1 "$GCKRESTORE" s.gck >out 2>err &&
	refused err "the image mounts '\''$TRASH/s/root'\'' of its host at '\''/'\'' in the job, and is not signed by a key that allowed_signers allows: name the source yourself (--root DIR)" &&
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed s.gck >out 2>err &&
	proc_restored $JPID $JSTART &&
	pivoted $JPID s && moves_on s && counted s &&
	kill -KILL $JPID && wait_gone $JPID
'

# gsend ARGS...: gpusend to this host's sshd, as root.
gsend() {
	HOME=$TRASH/home "$GCK_BINDIR/send/gpusend" -P "$port" \
	    -i "$TRASH/userkey" -o IdentityAgent=none \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "TMPDIR=$TRASH/rtmp $GCK_BINDIR/recv/gpurecv" "$@"
}

test_expect_success 'gpusend -p, unsigned, without --root: refused there, the job runs on here' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	mkdir home rtmp &&
	job g &&
	test_status 1 gsend -p $JPID root@127.0.0.1 >out 2>err &&
	test_grep "the image mounts .$TRASH/g/root. of its host at ./. in the job, and is not signed" err &&
	proc_unharmed $JPID $JSTART && moves_on g &&
	test -z "$(ls -A "$TMPDIR")" && test -z "$(ls -A rtmp)"
'

test_expect_success 'gpusend -p --root -M: the job moved, there in a PID namespace of its own' '
	test_status 0 gsend -p $JPID --root "$TRASH/g/root" -M /data="$TRASH/g/data" root@127.0.0.1 >out 2>err &&
	wait_gone $JPID &&
	P2=$(cat out) && proc_running $P2 &&
	started="$started $P2" &&
	test "$(readlink /proc/$P2/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	pivoted $P2 g && moves_on g && counted g &&
	kill -KILL $P2 && wait_gone $P2
'

test_expect_success 'gpusend --live -p --root -M: moved while it ran' '
	job l &&
	test_status 0 gsend --live -p $JPID --root "$TRASH/l/root" -M /data="$TRASH/l/data" root@127.0.0.1 >out 2>err &&
	wait_gone $JPID &&
	P2=$(cat out) && proc_running $P2 &&
	started="$started $P2" &&
	pivoted $P2 l && moves_on l && counted l &&
	kill -KILL $P2 && wait_gone $P2
'

test_expect_success 'a series of snapshots of it (--series), restored from the directory' '
	job r &&
	test_status 0 "$GCKPT" --series=ser -R -p $JPID 2>err &&
	moves_on r &&
	test_status 0 "$GCKPT" --series=ser -R -p $JPID 2>err &&
	C2=$(count r) &&
	kill -KILL $JPID && wait_gone $JPID &&
	test_status 0 "$GCKRESTORE" --root "$TRASH/r/root" -M /data="$TRASH/r/data" ser >out 2>err &&
	proc_restored $JPID $JSTART &&
	pivoted $JPID r && moves_on r && counted r
'

test_expect_success 'an incremental image of it (--parent), restored with its parent' '
	test_status 0 "$GCKPT" -R -p $JPID -o full.gck 2>err &&
	moves_on r &&
	test_status 0 "$GCKPT" --parent full.gck -p $JPID -o inc.gck 2>err &&
	wait_gone $JPID &&
	"$GCKINSPECT" inc.gck >show &&
	test_grep "^parent " show && test_grep "^root        $TRASH/r/root " show &&
	test_status 0 "$GCKRESTORE" --parent full.gck --root "$TRASH/r/root" -M /data="$TRASH/r/data" inc.gck >out 2>err &&
	proc_running $JPID &&
	pivoted $JPID r && moves_on r && counted r &&
	kill -KILL $JPID && wait_gone $JPID
'

test_expect_success 'gpuinspect -d: the roots, mounts and outside files two images differ in' '
	test_status 1 "$GCKINSPECT" -d j.gck e.gck >out 2>err &&
	test_grep "^~ root $TRASH/j/root -> $TRASH/e/root\$" out &&
	test_grep "^~ mount /data: from $TRASH/j/data -> $TRASH/e/data\$" out &&
	test_grep "^+ mount /etc from /etc (" out &&
	test_grep "^- outside $TRASH/j/log on fd 1 of process [0-9]*\$" out &&
	test_grep "^+ outside $TRASH/e/log on fd 1 of process [0-9]*\$" out &&
	! grep "^- mount" out &&
	test_status 1 "$GCKINSPECT" -d --json j.gck e.gck >d.json &&
	python3 - "$TRASH" <<-\PY &&
	import json, sys
	t = sys.argv[1]
	m = json.load(open("d.json"))["mounts"]
	assert m["root"] == {"a": t + "/j/root", "b": t + "/e/root"}, m["root"]
	assert [x["at"] for x in m["mounts"]["added"]] == ["/etc"], m["mounts"]
	assert m["mounts"]["changed"] == [{"at": "/data", "a": t + "/j/data",
	    "b": t + "/e/data"}], m["mounts"]
	assert m["mounts"]["removed"] == [], m["mounts"]
	PY
	test_status 0 "$GCKINSPECT" -d j.gck j.gck >out 2>err &&
	test ! -s out &&
	test_status 1 "$GCKINSPECT" -d j.gck j2.gck >out 2>err &&
	test_grep "^~ process " out &&
	! grep "^[-+~] \(root\|mount\|outside\) " out
'

test_done
