# hosts.sh: two hosts for the tests of gpusend -p between them, each
# an sshd in a PID namespace of its own, and what the tests ask of them.
# Sourced after lib.sh by t-cache.sh and t-live.sh.

require_criu
require_python
require_sshd
command -v unshare >/dev/null || test_skip_all "unshare not found"

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $GCKRECV"

started=
hosts=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	for _p in $hosts; do kill_tree $_p >/dev/null 2>&1; done
	:
}

# Two hosts, A and B: each an sshd in a PID namespace of its own.
# start_host NAME: starts it; use_host NAME: what lib.sh's helpers
# (ns_pid) and gsend then speak to.
start_host() {
	start_nssh || return 1
	hosts="$hosts $sshd_pid"
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >>known_hosts
	eval "port_$1=$port ns_id_$1=$ns_id sshd_$1=$sshd_pid"
}
# start_tree NAME ARGS: lib.sh's start_workload, the tree killed when
# the script ends.
start_tree() {
	start_workload "$@" && started="$started $WPID"
}

# start_hosts: the keys, known_hosts, and hosts A and B.
start_hosts() {
	mkdir home rtmp &&
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	: >known_hosts &&
	start_host A &&
	start_host B &&
	test "$ns_id_A" != "$ns_id_B"
}
use_host() {
	eval "port=\$port_$1 ns_id=\$ns_id_$1"
}

# gsend HOST ARGS: gpusend --stats=json to HOST, the JSON object (which
# it prints on stderr) on stdout, the rest of stderr on stderr; when it
# fails, what it said goes into the test's log too.  Each call has files
# of its own, for two may run at once.
gsend() {
	use_host $1
	shift
	_d=$(mktemp -d "$TRASH/gsend.XXXXXX") || return 1
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" --stats=json "$@" root@127.0.0.1 \
	    >"$_d/out" 2>"$_d/all"
	_st=$?
	grep '^{' "$_d/all"
	grep -v '^{' "$_d/all" >"$_d/err"
	cat "$_d/err" >&2
	if test $_st != 0 && test -n "${BASH_VERSION:-}"; then
		sed 's/^/gpusend said: /' "$_d/err" >&4
	fi
	rm -rf "$_d"
	return $_st
}

# stat FILE KEY: KEY of the JSON object in FILE.
stat() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# there HOST PID: the tree restored as PID on HOST runs, its memory
# intact (lib.sh's verify_workload); sets VHOST, its PID here.
there() {
	use_host $1
	VHOST=$(ns_pid $2)
	test -n "$VHOST" || { echo >&2 "no process $2 on $1"; return 1; }
	verify_workload $VHOST
}

# images DIR: the number of images in the cache DIR.
images() {
	ls "$1" | grep -c '^[0-9a-f]\{32\}\.gck$'
}

