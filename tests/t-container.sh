#!/bin/sh
test_description='containers: a runc container of a busybox root file system, checkpointed and restored by runc through the same criu'
. "$GCK_SRCDIR/lib.sh"

# What criu does here for a container, runc does: this script holds the
# ground that gpuckpt's own containers stand on (runc, busybox-static,
# iptables for criu's network lock, all from scripts/install-deps).
require_criu
require_python
require_sshd
for _c in runc busybox iptables-restore; do
	command -v $_c >/dev/null ||
	    test_skip_all "$_c not found (scripts/install-deps installs it)"
done
ldd "$(command -v busybox)" >/dev/null 2>&1 &&
    test_skip_all "busybox is not static (busybox-static)"

RUNC="runc --root $TRASH/runc"
CT=gck$$
test_cleanup() {
	$RUNC kill $CT KILL 2>/dev/null
	$RUNC delete -f $CT 2>/dev/null
	:
}

# bundle DIR: a runc bundle in DIR: a root file system of busybox, its
# program a shell counting in its own memory, writing each count to
# /tmp/count by rename (a reader, or a checkpoint, never sees it half
# written); no rlimits (root here may not raise them) and no terminal.
bundle() {
	mkdir -p "$1/rootfs/bin" "$1/rootfs/tmp" "$1/rootfs/proc" \
	    "$1/rootfs/sys" "$1/rootfs/dev" &&
	cp "$(command -v busybox)" "$1/rootfs/bin/busybox" &&
	for _a in sh sleep cat echo mv; do
		ln -s busybox "$1/rootfs/bin/$_a" || return 1
	done &&
	(cd "$1" && runc spec) &&
	python3 - "$1/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["process"]["terminal"] = False
c["process"].pop("rlimits", None)
c["process"]["args"] = ["sh", "-c",
    "i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"]
c["root"] = {"path": "rootfs", "readonly": False}
json.dump(c, open(p, "w"), indent=1)
PY
}

# count: the count the container wrote last.
count() {
	cat "$TRASH/ct/rootfs/tmp/count" 2>/dev/null
}

# ct_pid: the PID runc gives for the container, its PID namespace's init.
ct_pid() {
	$RUNC state $CT | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])'
}

# root_of PID: what the mount at PID's / is of (mountinfo's root field).
root_of() {
	awk '$5 == "/" { print $4 }' "/proc/$1/mountinfo"
}

test_expect_success 'a busybox container runs under runc, in namespaces of its own' '
	bundle "$TRASH/ct" &&
	(cd "$TRASH/ct" && setsid sh -c "$RUNC run -d $CT </dev/null 2>&1 | cat >\"$TRASH/ct.log\"" &) &&
	wait_for_line "$TRASH/ct/rootfs/tmp/count" "^[0-9]" 30 &&
	P=$(ct_pid) && test -n "$P" &&
	for _ns in pid mnt ipc uts net; do
		test "$(readlink /proc/$P/ns/$_ns)" != "$(readlink /proc/self/ns/$_ns)" ||
		    return 1
	done &&
	root_of "$P" | grep -q "/ct/rootfs\$"
'

test_expect_success 'runc checkpoint stops the container and records it' '
	_i=0 && while test "$(count)" -lt 20; do
		_i=$((_i + 1)) && test $_i -lt 300 && sleep 0.1 || return 1
	done &&
	$RUNC checkpoint --image-path "$TRASH/img" $CT &&
	test -f "$TRASH/img/pstree.img" &&
	ls "$TRASH"/img/mountpoints-*.img >/dev/null &&
	! proc_running "$P" &&
	C1=$(count) && sleep 0.5 && test "$(count)" = "$C1"
'

test_expect_success 'runc restore: the count goes on from where it stopped, in a new process' '
	$RUNC restore -d --bundle "$TRASH/ct" --image-path "$TRASH/img" $CT </dev/null >"$TRASH/restore.log" 2>&1 &&
	P2=$(ct_pid) && test -n "$P2" && test "$P2" != "$P" &&
	test "$(count)" -ge "$C1" &&
	_i=0 && while test "$(count)" -le "$C1"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	C2=$(count) && sleep 0.3 && test "$(count)" -gt "$C2" &&
	test "$(readlink /proc/$P2/ns/pid)" != "$(readlink /proc/self/ns/pid)"
'

# What runc does, gpuckpt and gpurestore do: a second container, its
# output in a file of the host's (which runc checkpoint cannot take),
# checkpointed by the PID runc gives, its PID namespace's init.
CT2=gck2$$
test_cleanup() {
	for _c in $CT $CT2; do
		$RUNC kill $_c KILL 2>/dev/null
		$RUNC delete -f $_c 2>/dev/null
	done
	for _p in $P3 $P4; do
		kill -KILL $_p 2>/dev/null
	done
	:
}
GCK_ALLOWED_SIGNERS=$TRASH/no-such-file
export GCK_ALLOWED_SIGNERS

# count2, counted2: the count the second container wrote last; its log
# holds 1, 2, 3... each once, in order.
count2() {
	cat "$TRASH/ct2/rootfs/tmp/count" 2>/dev/null
}
counted2() {
	awk 'int($0) != NR { print "line " NR ": " $0; bad = 1 }
	    END { exit bad || NR < 2 }' "$TRASH/ct2.log"
}

test_expect_success 'gpuckpt -p of a container: the whole of it, its mounts in the manifest' '
	bundle "$TRASH/ct2" &&
	python3 - "$TRASH/ct2/config.json" <<-\PY &&
	import json, sys
	c = json.load(open(sys.argv[1]))
	c["process"]["args"][2] = c["process"]["args"][2].replace(
	    "mv /tmp/count.new /tmp/count;", "mv /tmp/count.new /tmp/count; echo $i;")
	json.dump(c, open(sys.argv[1], "w"), indent=1)
	PY
	(cd "$TRASH/ct2" && setsid $RUNC run -d $CT2 </dev/null >"$TRASH/ct2.log" 2>&1) &&
	wait_for_line "$TRASH/ct2/rootfs/tmp/count" "^[0-9]" 30 &&
	P=$($RUNC state $CT2 | python3 -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	test -n "$P" &&
	test_status 0 "$GCKPT" -p $P -o ct2.gck 2>err &&
	wait_gone $P &&
	C1=$(count2) && sleep 0.3 && test "$(count2)" = "$C1" &&
	"$GCKINSPECT" ct2.gck >show &&
	test_grep "^root        $TRASH/ct2/rootfs (a mount namespace of its own)\$" show &&
	test_grep "^outside     $TRASH/ct2.log on fd 1 of process 1\$" show &&
	# the shell, and its sleep when the dump found it in one
	test_grep "^processes   [12], .* root 1\$" show
'

test_expect_success 'unsigned, without --root: refused' '
	test_status 1 "$GCKRESTORE" ct2.gck >out 2>err &&
	test_grep "^gpurestore: the image mounts .$TRASH/ct2/rootfs. of its host at ./. in the job, and is not signed" err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpurestore --root: the container again, in new namespaces, its count going on' '
	test_status 0 "$GCKRESTORE" --root "$TRASH/ct2/rootfs" -P pid ct2.gck >out 2>err &&
	P3=$(cat pid) && proc_running $P3 && test "$P3" != "$P" &&
	for _ns in pid mnt ipc uts net; do
		test "$(readlink /proc/$P3/ns/$_ns)" != "$(readlink /proc/self/ns/$_ns)" ||
		    return 1
	done &&
	test "$(awk "\$1 == \"NSpid:\" { print \$NF }" /proc/$P3/status)" = 1 &&
	root_of $P3 | grep -q "/ct2/rootfs\$" &&
	_i=0 && while test "$(count2)" -le "$C1"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	counted2 &&
	kill -KILL $P3 && wait_gone $P3
'

# gsend ARGS...: gpusend to this host's sshd, as root.
gsend() {
	HOME=$TRASH/home "$GCK_BINDIR/send/gpusend" -P "$port" \
	    -i "$TRASH/userkey" -o IdentityAgent=none \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "TMPDIR=$TRASH/rtmp $GCK_BINDIR/recv/gpurecv" "$@"
}

test_expect_success 'gpusend -p --root of a container: moved, in new namespaces, its count going on' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	mkdir home rtmp &&
	$RUNC delete -f $CT2 &&
	: >"$TRASH/ct2.log" && rm -f "$TRASH/ct2/rootfs/tmp/count" &&
	(cd "$TRASH/ct2" && setsid $RUNC run -d $CT2 </dev/null >"$TRASH/ct2.log" 2>&1) &&
	wait_for_line "$TRASH/ct2/rootfs/tmp/count" "^[0-9]" 30 &&
	P=$($RUNC state $CT2 | python3 -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	test_status 0 gsend -p $P --root "$TRASH/ct2/rootfs" root@127.0.0.1 >out 2>err &&
	wait_gone $P &&
	P4=$(cat out) && proc_running $P4 &&
	test "$(readlink /proc/$P4/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	test "$(awk "\$1 == \"NSpid:\" { print \$NF }" /proc/$P4/status)" = 1 &&
	C1=$(count2) && _i=0 && while test "$(count2)" -le "$C1"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	counted2 &&
	kill -KILL $P4 && wait_gone $P4
'

test_done
