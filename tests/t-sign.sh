#!/bin/sh
test_description='signed images: gpuckpt --sign, gpurestore --allowed-signers, ssh-keygen -Y verify'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
require_sshd
for _c in ssh-agent ssh-add unshare zstd; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
SIGIMG=$GCK_SRCDIR/sigimg.py
NS=gpuckpt-image
RUNDIR=$TRASH/run

started=
agent_pid=
sshd_pid=
test_cleanup() {
	test -n "$agent_pid" && kill $agent_pid 2>/dev/null
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# fp KEY: the fingerprint of the key, as ssh-keygen -l prints it.
fp() {
	ssh-keygen -l -f "$1" | awk '{ print $2 }'
}

# refused ERR LINE: the restore failed with exactly LINE on ERR, left
# nothing on standard output (out), no process of the image, and
# nothing in $TMPDIR.
refused() {
	echo "$2" >expect &&
	test_cmp expect "$1" &&
	test_must_be_empty out &&
	proc_gone $WPID &&
	test -z "$(ls -A "$TMPDIR")"
}

# restored: the workload runs again as $WPID, its memory intact, its
# counter going on; then it is killed.
restored() {
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	sleep 0.3 &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before &&
	test -z "$(ls -A "$TMPDIR")" &&
	kill_tree $WPID
}

# The only allowed_signers a test means: none from the system.
GCK_ALLOWED_SIGNERS=$TRASH/no-such-file
export GCK_ALLOWED_SIGNERS

test_expect_success 'keys and allowed_signers files' '
	ssh-keygen -q -t ed25519 -N "" -C alice -f alice &&
	ssh-keygen -q -t ecdsa -N "" -C bob -f bob &&
	ssh-keygen -q -t ed25519 -N "" -C carol -f carol &&
	FPA=$(fp alice.pub) && FPB=$(fp bob.pub) && FPC=$(fp carol.pub) &&
	test -n "$FPA" && test -n "$FPB" && test -n "$FPC" &&
	{ echo "alice $(cat alice.pub)"; echo "bob $(cat bob.pub)"; } \
	    >allowed &&
	echo "carol $(cat carol.pub)" >only-carol &&
	echo "alice valid-before=\"20200101\" $(cat alice.pub)" >expired &&
	echo "alice valid-after=\"29990101\" $(cat alice.pub)" >notyet &&
	echo "alice namespaces=\"git\" $(cat alice.pub)" >git-only
'

test_expect_success 'gpuckpt --sign=KEY: the signature follows the trailer' '
	start w -m 64 &&
	test_status 0 "$GCKPT" --sign=alice -R -p $WPID -o A.gck 2>err &&
	test_must_be_empty err &&
	zstd -dc A.gck | tar -tf - >list &&
	tail -n 2 list >last &&
	printf "gpuckpt.sums\ngpuckpt.sig\n" >expect &&
	test_cmp expect last &&
	test_status 0 "$GCKPT" -R -p $WPID -o U.gck 2>err &&
	test_must_be_empty err &&
	zstd -dc U.gck | tar -tf - | tail -n 1 >last &&
	echo gpuckpt.sums >expect &&
	test_cmp expect last
'

test_expect_success 'ssh-keygen -Y verify accepts it, on what gpuinspect -x writes out' '
	test_status 0 "$GCKINSPECT" -x ax A.gck &&
	ssh-keygen -Y verify -n $NS -f allowed -I alice -s ax/gpuckpt.sig \
	    <ax/gpuckpt.sums >out 2>&1 &&
	test_grep "^Good \"$NS\" signature for alice with ED25519 key $FPA\$" out &&
	# what tar extracts is the same
	mkdir tx && zstd -dc A.gck | tar -xf - -C tx &&
	cmp tx/gpuckpt.sums ax/gpuckpt.sums &&
	cmp tx/gpuckpt.sig ax/gpuckpt.sig &&
	# and the trailer lists the manifest by its digest
	python3 - ax/gpuckpt.sums ax/gpuckpt.json <<-\EOF
	import hashlib, json, sys
	t = json.load(open(sys.argv[1]))
	m = open(sys.argv[2], "rb").read()
	assert t["entries"][0]["name"] == "gpuckpt.json"
	assert t["entries"][0]["sha256"] == hashlib.sha256(m).hexdigest()
	EOF
	! ssh-keygen -Y verify -n $NS -f only-carol -I carol \
	    -s ax/gpuckpt.sig <ax/gpuckpt.sums >out 2>&1
'

test_expect_success 'gpuinspect shows who signed; --verify checks it' '
	test_status 0 "$GCKINSPECT" A.gck >out &&
	test_grep "^signed      by ED25519 key $FPA (not checked" out &&
	test_status 0 "$GCKINSPECT" U.gck >out &&
	! test_grep "^signed " out &&
	test_status 0 "$GCKINSPECT" --json A.gck >a.doc &&
	test_status 0 "$GCKINSPECT" --json U.gck >u.doc &&
	python3 - "$FPA" <<-\EOF
	import json, sys
	a = json.load(open("a.doc"))["image"]["signature"]
	u = json.load(open("u.doc"))["image"]["signature"]
	assert a == {"key": "ED25519", "fingerprint": sys.argv[1]}, a
	assert u is None, u
	EOF
	test_status 0 "$GCKINSPECT" --verify --allowed-signers=allowed A.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	test_grep "^signed by alice, ED25519 key $FPA, as .allowed. allows\$" out &&
	test_status 1 "$GCKINSPECT" --verify --allowed-signers=only-carol \
	    A.gck >out 2>err &&
	echo "gpuinspect: image signed by ED25519 key $FPA, which '\''only-carol'\'' does not allow" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKINSPECT" --verify --allowed-signers=allowed \
	    U.gck >out 2>err &&
	echo "gpuinspect: the image is not signed, and '\''allowed'\'' allows only signed images" >expect &&
	test_cmp expect err
'

test_expect_success 'valid: gpurestore --allowed-signers restores it' '
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed A.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'valid, from a pipe: read whole first, then restored' '
	cat A.gck | test_status 0 "$GCKRESTORE" -v \
	    --allowed-signers=allowed >out 2>err &&
	test_grep "^gpurestore: reading the whole image before its signature is checked\$" err &&
	test_grep "^gpurestore: image signed by alice (ED25519 key $FPA), as .allowed. allows\$" err &&
	restored
'

test_expect_success 'missing: an image not signed is refused, before anything' '
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed U.gck \
	    >out 2>err &&
	refused err "gpurestore: the image is not signed, and '\''allowed'\'' allows only signed images" &&
	cat U.gck | test_status 1 "$GCKRESTORE" --allowed-signers=allowed \
	    >out 2>err &&
	refused err "gpurestore: the image is not signed, and '\''allowed'\'' allows only signed images"
'

test_expect_success 'the system file applies without the option' '
	cp allowed system-allowed &&
	GCK_ALLOWED_SIGNERS=$TRASH/system-allowed test_status 1 \
	    "$GCKRESTORE" U.gck >out 2>err &&
	refused err "gpurestore: the image is not signed, and '\''$TRASH/system-allowed'\'' allows only signed images" &&
	GCK_ALLOWED_SIGNERS=$TRASH/system-allowed test_status 0 \
	    "$GCKRESTORE" A.gck >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'without either, a signed image restores as any' '
	test_status 0 "$GCKRESTORE" A.gck >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'other key: signed by a key the file does not list' '
	start w2 -m 32 &&
	test_status 0 "$GCKPT" --sign=carol -k -p $WPID -o C.gck 2>err &&
	wait_gone $WPID &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed C.gck \
	    >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPC, which '\''allowed'\'' does not allow"
'

test_expect_success 'expired, not yet valid, or for another namespace: refused' '
	WSTATUS=$TRASH/w.status &&
	WPID=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" "$WSTATUS") &&
	test_status 1 "$GCKRESTORE" --allowed-signers=expired A.gck \
	    >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPA, whose entry in '\''expired'\'' has expired" &&
	test_status 1 "$GCKRESTORE" --allowed-signers=notyet A.gck \
	    >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPA, whose entry in '\''notyet'\'' is not yet valid" &&
	test_status 1 "$GCKRESTORE" --allowed-signers=git-only A.gck \
	    >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPA, which '\''git-only'\'' does not allow to sign images"
'

test_expect_success 'invalid: a signature changed is refused' '
	python3 "$SIGIMG" flip A.gck flip.gck &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed flip.gck \
	    >out 2>err &&
	refused err "gpurestore: the signature of ED25519 key $FPA does not match the image"
'

test_expect_success 'an entry changed after signing: refused before it is used' '
	python3 "$SIGIMG" manifest A.gck evil.gck &&
	zstd -dc evil.gck | tar -xOf - gpuckpt.json | grep -q "\"evil\"" &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed evil.gck \
	    >out 2>err &&
	test_line_count err 1 &&
	refused err "gpurestore: corrupt image: '\''gpuckpt.json'\'' is not what was signed" &&
	# the trailer made to match it: then the signature does not
	python3 "$SIGIMG" resum A.gck evil2.gck &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed evil2.gck \
	    >out 2>err &&
	refused err "gpurestore: the signature of ED25519 key $FPA does not match the image" &&
	test_status 1 "$GCKINSPECT" --verify evil2.gck >out 2>err &&
	echo "gpuinspect: the signature of ED25519 key $FPA does not match the image" >expect &&
	test_cmp expect err
'

test_expect_success 'the signature of another image spliced in: refused' '
	start w3 -m 32 &&
	test_status 0 "$GCKPT" --sign=alice -k -p $WPID -o A2.gck 2>err &&
	wait_gone $WPID &&
	WSTATUS=$TRASH/w.status &&
	WPID=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" "$WSTATUS") &&
	python3 "$SIGIMG" splice A.gck A2.gck splice.gck &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed splice.gck \
	    >out 2>err &&
	refused err "gpurestore: the signature of ED25519 key $FPA does not match the image"
'

test_expect_success 'ECDSA key held by ssh-agent: gpuckpt --sign=KEY.pub' '
	eval "$(ssh-agent -s -a "$TRASH/agent.sock")" >/dev/null &&
	agent_pid=$SSH_AGENT_PID &&
	ssh-add -q bob 2>/dev/null &&
	start w4 -m 32 &&
	test_status 0 "$GCKPT" --sign=bob.pub -k -p $WPID -o B.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed B.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'a key it cannot sign with: the checkpoint fails, the tree runs on' '
	start w5 -m 16 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	# a public key, with no agent to hold its private half, nor a file
	cp bob.pub lone.pub &&
	SSH_AUTH_SOCK= test_status 1 "$GCKPT" --sign=lone.pub -k -p $WPID \
	    -o X.gck 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot sign with .lone.pub.: " err &&
	test_grep "process tree $WPID left running\$" err &&
	! test -e X.gck &&
	test_status 1 "$GCKPT" --sign=nokey -k -p $WPID -o X.gck 2>err &&
	echo "gpuckpt: cannot read the signing key '\''nokey'\'': No such file or directory" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKPT" --sign=alice -c none -k -p $WPID -o X.gck \
	    2>err &&
	echo "gpuckpt: only a compressed image of format 2 or 3 can be signed" >expect &&
	test_cmp expect err &&
	! test -e X.gck &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before &&
	kill_tree $WPID
'

test_expect_success 'incremental: the chunks of a parent signed by another key' '
	start w6 -m 64 -r 5 &&
	test_status 0 "$GCKPT" --sign=carol -R -p $WPID -o P.gck 2>err &&
	kill -USR2 $WPID && wait_for_line "$WSTATUS" "^rewrote " 30 &&
	test_status 0 "$GCKPT" --sign=alice --parent=P.gck -k -p $WPID \
	    -o I.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	zstd -dc I.gck | tar -xOf - gpuckpt.sums | grep -q "\"ref\":true" &&
	# the parent alone: carol is not allowed
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed P.gck \
	    >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPC, which '\''allowed'\'' does not allow" &&
	# the child, signed by alice: its signature covers the digests of
	# the chunks it takes from P, each checked as it is read
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed \
	    --parent=P.gck I.gck >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'incremental of patches (pages rewritten one here, one there), signed: restored as allowed' '
	start w8 -m 64 -p pages -r 5 &&
	test_status 0 "$GCKPT" -R -p $WPID -o P3.gck 2>err &&
	kill -USR2 $WPID && wait_for_line "$WSTATUS" "^rewrote " 30 &&
	test_status 0 "$GCKPT" --sign=alice --parent=P3.gck -k -p $WPID \
	    -o I3.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	zstd -dc I3.gck | tar -xOf - gpuckpt.sums | grep -q "\"patch\":true" &&
	test_status 0 "$GCKINSPECT" --verify --allowed-signers=allowed \
	    --parent=P3.gck I3.gck >out 2>err &&
	test_status 0 "$GCKRESTORE" --allowed-signers=allowed \
	    --parent=P3.gck I3.gck >out 2>err &&
	test_must_be_empty err &&
	restored
'

test_expect_success 'incremental: a child signed by a key not allowed, its parent by one' '
	start w7 -m 32 &&
	test_status 0 "$GCKPT" --sign=alice -R -p $WPID -o P2.gck 2>err &&
	test_status 0 "$GCKPT" --sign=carol --parent=P2.gck -k -p $WPID \
	    -o I2.gck 2>err &&
	wait_gone $WPID &&
	test_status 1 "$GCKRESTORE" --allowed-signers=allowed \
	    --parent=P2.gck I2.gck >out 2>err &&
	refused err "gpurestore: image signed by ED25519 key $FPC, which '\''allowed'\'' does not allow"
'

mkdir home rtmp store
RPATH="GCK_RUNDIR=$RUNDIR TMPDIR=$TRASH/rtmp $GCKRECV"

# gsend ARGS: gpusend to this sshd, whose gpurecv restores only what
# alice or bob signed (gpurecv --allowed-signers); gstore ARGS: to store.
gsend() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" -i "$TRASH/userkey" \
	    -o IdentityAgent=none \
	    --remote-path "$RPATH --allowed-signers=$TRASH/allowed" "$@"
}
gstore() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" -i "$TRASH/userkey" \
	    -o IdentityAgent=none --remote-path "$RPATH" "$@"
}

test_expect_success 'sshd in a PID namespace of its own' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_nssh &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	remote echo hello >out &&
	echo hello >expect &&
	test_cmp expect out
'

test_expect_success 'gpusend --sign -p: gpurecv --allowed-signers restores it there' '
	start s1 -m 32 &&
	test_status 0 gsend --sign="$TRASH/alice" -p $WPID root@127.0.0.1 \
	    >out 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	VHOST=$(ns_pid $WPID) &&
	test -n "$VHOST" &&
	verify_workload $VHOST &&
	kill_tree $VHOST
'

test_expect_success 'gpusend --live --sign: the image that stops it is signed' '
	start s3 -m 32 &&
	test_status 0 gsend --live --sign="$TRASH/alice" -p $WPID \
	    root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	VHOST=$(ns_pid $WPID) &&
	test -n "$VHOST" &&
	verify_workload $VHOST &&
	kill_tree $VHOST
'

test_expect_success 'gpusend -p unsigned: refused there, the tree runs on here' '
	start s2 -m 16 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	test_status 1 gsend -p $WPID root@127.0.0.1 >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpusend: remote 127.0.0.1: the image is not signed, and '\''$TRASH/allowed'\'' allows only signed images; process tree $WPID left running\$" err &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before &&
	kill_tree $WPID
'

test_expect_success 'a signed image file, sent and stored: its signature with it' '
	test_status 0 gstore A.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	cmp A.gck store/A.gck &&
	test_status 0 gsend B.gck root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	VHOST=$(ns_pid $(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" w4.status)) &&
	test -n "$VHOST" &&
	verify_workload $VHOST w4.status &&
	kill_tree $VHOST
'

test_done
