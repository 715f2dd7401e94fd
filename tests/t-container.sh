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

# A GPU container, as the NVIDIA container toolkit makes one: the
# driver's library (the stand-in, fakecuda/libcuda.so.1) and its state
# bound in, and the device nodes of the driver, made here as the driver
# makes them (character devices of major 195: nvidiactl, and nvidiaN,
# N the GPU's minor number, which the stand-in's NVML gives as its
# ordinal).  Its program is cudawork, its status in /status, bound from here.
F=$TRASH/fake
A=GPU-aaaaaaaa-1111-4000-8000-000000000001
B=GPU-bbbbbbbb-1111-4000-8000-000000000002
C=GPU-cccccccc-1111-4000-8000-000000000003
CT3=gck3$$
test_cleanup() {
	for _c in $CT $CT2 $CT3; do
		$RUNC kill $_c KILL 2>/dev/null
		$RUNC delete -f $_c 2>/dev/null
	done
	for _p in $P3 $P4 $P5; do
		kill -KILL $_p 2>/dev/null
	done
	sleep 0.2
	# the cgroups a restore made for a container it restored
	find /sys/fs/cgroup -maxdepth 5 -depth -type d -name "gck*$$" \
	    -exec rmdir {} + 2>/dev/null
	:
}

# cgroups_of NAME: the cgroup directories of container NAME, if any.
cgroups_of() {
	find /sys/fs/cgroup -maxdepth 5 -type d -name "$1" 2>/dev/null
}

# fake CMD...: CMD with the stand-in driver as this host's.
fake() {
	FAKECUDA_DIR=$F GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1 \
	    GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1 \
	    FAKECUDA_CALL_TIMEOUT_MS=20000 "$@"
}

# node PATH: a device node's major:minor, in hex, as stat gives them.
node() {
	stat -c %t:%T "$1"
}

test_expect_success 'a GPU container: cudawork on GPU 0, the driver and its device nodes bound in' '
	mkdir -p "$F/inject" "$F/delay" "$TRASH/nv" "$TRASH/gw" &&
	for _g in "$A 01" "$B 02" "$C 03"; do
		set -- $_g &&
		echo "$1 9.0 1073741824 0000:$2:00.0 NVIDIA H100 80GB HBM3" || return 1
	done >"$F/gpus" &&
	mknod "$TRASH/nv/nvidiactl" c 195 255 &&
	mknod "$TRASH/nv/nvidia0" c 195 0 &&
	mknod "$TRASH/nv/nvidia1" c 195 1 &&
	bundle "$TRASH/ct3" &&
	mkdir -p "$TRASH/ct3/rootfs/lib64" "$TRASH/ct3/rootfs/lib/x86_64-linux-gnu" \
	    "$TRASH/ct3/rootfs/usr/lib" "$TRASH/ct3/rootfs/status" &&
	for _l in $(ldd "$GCK_TESTDIR/cudawork" | sed -n "s/.* \(\/[^ ]*\) (.*/\1/p;s/^[ 	]*\(\/[^ ]*\) (.*/\1/p"); do
		mkdir -p "$TRASH/ct3/rootfs${_l%/*}" &&
		cp -L "$_l" "$TRASH/ct3/rootfs$_l" || return 1
	done &&
	cp "$GCK_TESTDIR/cudawork" "$TRASH/ct3/rootfs/bin/cudawork" &&
	python3 - "$TRASH/ct3/config.json" "$TRASH" "$F" "$GCK_TESTDIR" <<-\PY &&
	import json, sys
	p, trash, f, testdir = sys.argv[1:]
	c = json.load(open(p))
	c["process"]["args"] = ["/bin/cudawork", "-f", "/status/status"]
	c["process"]["env"] += ["LD_LIBRARY_PATH=/usr/lib", "FAKECUDA_DIR=" + f,
	    "FAKECUDA_CALL_TIMEOUT_MS=20000"]
	def bind(src, dst):
	    c["mounts"].append({"destination": dst, "type": "bind",
	        "source": src, "options": ["rbind", "rw"]})
	bind(testdir + "/fakecuda/libcuda.so.1", "/usr/lib/libcuda.so.1")
	bind(f, f)
	bind(trash + "/gw", "/status")
	for n in ("nvidiactl", "nvidia0"):
	    bind(trash + "/nv/" + n, "/dev/" + n)
	json.dump(c, open(p, "w"), indent=1)
	PY
	(cd "$TRASH/ct3" && setsid $RUNC run -d $CT3 </dev/null >"$TRASH/ct3.log" 2>&1) &&
	wait_for_line "$TRASH/gw/status" "^ready " 60 &&
	P=$($RUNC state $CT3 | python3 -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	grep -q "^ready pid=1 .* devs=$A\$" "$TRASH/gw/status" &&
	verify_workload $P "$TRASH/gw/status" &&
	test "$(fake "$GCK_TESTDIR/fakecuda/fakectl" state $P)" = RUNNING &&
	test_status 0 fake "$GCKPT" -p $P -o gpu.gck 2>err &&
	wait_gone $P &&
	$RUNC delete -f $CT3 && test -z "$(cgroups_of $CT3)" &&
	"$GCKINSPECT" gpu.gck >show &&
	test_grep "^mount       /dev/nvidia0 from $TRASH/nv/nvidia0 (" show &&
	test_grep "^mount       /dev/nvidiactl from $TRASH/nv/nvidiactl (" show &&
	test_grep "$A" show &&
	"$GCKINSPECT" -x gx gpu.gck &&
	python3 -c "import json, sys; g = json.load(open(\"gx/gpuckpt.json\"))[\"cuda\"][\"gpus\"]; sys.exit(not (len(g) == 1 and g[0][\"minor\"] == 0))"
'

# The sources named here, but the device nodes: the restore binds those.
MAPS="-M /usr/lib/libcuda.so.1=$GCK_TESTDIR/fakecuda/libcuda.so.1 -M $F=$F -M /status=$TRASH/gw"

test_expect_success 'onto a GPU whose device node is not here beside the others: refused, nothing runs' '
	_lines=$(wc -l <"$TRASH/gw/status") &&
	test_status 1 fake "$GCKRESTORE" --root "$TRASH/ct3/rootfs" $MAPS --gpu-map 0=2 gpu.gck >out 2>err &&
	test_grep "^gpurestore: the job.s GPU of device node .$TRASH/nv/nvidia0. (minor 0) is restored onto the GPU of minor 2, whose device node is not here beside it: name it yourself (--mount-map /dev/nvidia0=NODE)\$" err &&
	test_line_count err 1 &&
	test -z "$(ls -A "$TMPDIR")" && test ! -s out &&
	test -z "$(cgroups_of $CT3)" &&
	! ps -eo args | grep -q "^/bin/cudawor[k]" &&
	test "$(wc -l <"$TRASH/gw/status")" = "$_lines"
'

test_expect_success 'gpurestore --gpu-map 0=1: the container on GPU 1, its /dev/nvidia0 the node of minor 1, unnamed' '
	test_status 0 fake "$GCKRESTORE" --root "$TRASH/ct3/rootfs" $MAPS --gpu-map 0=1 -P pid gpu.gck >out 2>err &&
	P5=$(cat pid) && proc_running $P5 &&
	test "$(readlink /proc/$P5/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	test "$(node /proc/$P5/root/dev/nvidia0)" = c3:1 &&
	test "$(node /proc/$P5/root/dev/nvidiactl)" = c3:ff &&
	test -n "$(cgroups_of $CT3)" &&
	verify_workload $P5 "$TRASH/gw/status" &&
	grep "^verify " "$TRASH/gw/status" | tail -n 1 | grep -q " devs=$B\$" &&
	kill -KILL $P5 && wait_gone $P5
'

# ct2_run: the second container started afresh, its PID in P.
ct2_run() {
	$RUNC delete -f $CT2 2>/dev/null
	: >"$TRASH/ct2.log" && rm -f "$TRASH/ct2/rootfs/tmp/count" &&
	(cd "$TRASH/ct2" && setsid $RUNC run -d $CT2 </dev/null >"$TRASH/ct2.log" 2>&1) &&
	wait_for_line "$TRASH/ct2/rootfs/tmp/count" "^[0-9]" 30 &&
	P=$($RUNC state $CT2 | python3 -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	test -n "$P"
}

# goes_on2 PID: the restored container PID counts on, in order.
goes_on2() {
	test "$(awk "\$1 == \"NSpid:\" { print \$NF }" /proc/$1/status)" = 1 &&
	C1=$(count2) && _i=0 && while test "$(count2)" -le "$C1"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	counted2
}

test_expect_success 'gpusend --live -p --root of a container: moved while it ran' '
	ct2_run &&
	test_status 0 gsend --live -p $P --root "$TRASH/ct2/rootfs" root@127.0.0.1 >out 2>err &&
	wait_gone $P &&
	P4=$(cat out) && proc_running $P4 && goes_on2 $P4 &&
	kill -KILL $P4 && wait_gone $P4
'

test_expect_success 'snapshots of a container (--series -R), restored from the directory' '
	ct2_run &&
	test_status 0 "$GCKPT" --series=ser -R -p $P 2>err &&
	C0=$(count2) && _i=0 && while test "$(count2)" -le "$C0"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	test_status 0 "$GCKPT" --series=ser -R -p $P 2>err &&
	test "$("$GCKINSPECT" ser | grep -c "^snapshot ")" -ge 2 ||
	    "$GCKINSPECT" ser >&2 &&
	$RUNC kill $CT2 KILL && wait_gone $P &&
	test_status 0 "$GCKRESTORE" --root "$TRASH/ct2/rootfs" -P pid ser >out 2>err &&
	P4=$(cat pid) && proc_running $P4 &&
	C1=$(count2) && _i=0 && while test "$(count2)" -le "$C1"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	kill -KILL $P4 && wait_gone $P4
'

test_expect_success 'a signed incremental image of a container (-R, then --parent): restored from its own paths' '
	ssh-keygen -q -t ed25519 -N "" -C alice -f alice &&
	echo "alice $(cat alice.pub)" >allowed &&
	ct2_run &&
	test_status 0 "$GCKPT" --sign=alice -R -p $P -o full.gck 2>err &&
	C0=$(count2) && _i=0 && while test "$(count2)" -le "$C0"; do
		_i=$((_i + 1)) && test $_i -lt 100 && sleep 0.1 || return 1
	done &&
	test_status 0 "$GCKPT" --sign=alice --parent full.gck -p $P -o inc.gck 2>err &&
	wait_gone $P &&
	"$GCKINSPECT" inc.gck >show &&
	test_grep "^parent " show &&
	test_status 1 "$GCKRESTORE" --parent full.gck inc.gck >out 2>err &&
	test_grep "^gpurestore: the image mounts .$TRASH/ct2/rootfs. of its host at ./. in the job, and is not signed by a key that allowed_signers allows" err &&
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed --parent full.gck -P pid inc.gck >out 2>err &&
	P4=$(cat pid) && proc_running $P4 && goes_on2 $P4 &&
	kill -KILL $P4 && wait_gone $P4
'

test_done
