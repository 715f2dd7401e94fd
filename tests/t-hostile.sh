#!/bin/sh
test_description='gpurestore and gpuinspect refuse damaged and hostile streams'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
holder=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$holder" && kill_tree $holder >/dev/null 2>&1
	:
}

# sound DIR: writes handcrafted sound streams, built around the entries
# of good.tar, into DIR: the hostile ones are tests/hostile.py's.
sound() {
	python3 - "$@" <<'EOF'
import copy, ctypes, io, json, os, re, struct, subprocess, sys, tarfile
import time

out = sys.argv[1]
good = tarfile.open("good.tar")
members = good.getmembers()
datas = [good.extractfile(m).read() for m in members]
DIGEST = "SCHILY.xattr.gpuckpt.xxh3"

def info(name, typ=tarfile.REGTYPE, size=0, **kw):
    t = tarfile.TarInfo(name)
    t.type, t.size, t.mode = typ, size, 0o600
    t.uid = t.gid = 0
    t.uname = t.gname = "root"
    t.mtime = int(time.time())
    t.pax_headers = {DIGEST: "0123456789abcdef"}
    for k, v in kw.items():
        setattr(t, k, v)
    return t

def entry(i, data=None):
    t = copy.copy(members[i])
    t.pax_headers = dict(members[i].pax_headers)
    d = datas[i] if data is None else data
    t.size = len(d)
    return t, d

def tar(entries, tail=b""):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, d in entries:
            t.addfile(ti, io.BytesIO(d) if d is not None else None)
    return buf.getvalue() + tail

def save(name, b):
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)

def zstd(name, b):
    r = subprocess.run(["zstd", "-q", "-c"], input=b, capture_output=True,
                       check=True)
    save(name, r.stdout)

manifest = entry(0)
last = len(members) - 1
crius = list(range(1, last))

# The same entries, rewritten by another tar writer: must restore.
save("rewritten.tar", tar([entry(i) for i in range(len(members))]))

# Digests as the image format defines them: XXH3 64-bit, seed 0.
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

def xxh3(b):
    return "%016x" % xxh.XXH3_64bits(b, len(b))

def reg(name, data, typ=tarfile.REGTYPE):
    """An entry whose pax header holds the true digest of data."""
    t = info(name, typ, size=len(data) if typ == tarfile.REGTYPE else 0)
    t.pax_headers[DIGEST] = xxh3(data)
    return t, data if typ == tarfile.REGTYPE else None

def sparse(name, size, regions, stored, count=None):
    """A GNU sparse 1.0 entry: its map, then the regions stored."""
    m = "%d\n" % (len(regions) if count is None else count)
    m = (m + "".join("%d\n%d\n" % r for r in regions)).encode()
    m += bytes(-len(m) % 512)
    d = stored + b"".join(struct.pack("<QQ", o, n) for o, n in regions
                          if n > 0) + struct.pack("<Q", size)
    head, _, base = name.rpartition("/")
    t, _ = reg(head + "/GNUSparseFile.0/" + base, m + stored)
    t.pax_headers.update({
        DIGEST: xxh3(d), "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
        "GNU.sparse.name": name, "GNU.sparse.realsize": str(size)})
    return t, m + stored

def blob(ents, tail=b""):
    """A tar of entries (t, data) and of forged ones (bytes, t)."""
    b = b""
    for x, d in ents:
        if isinstance(x, bytes):
            b += x
        else:
            d = d or b""
            b += x.tobuf(tarfile.PAX_FORMAT) + d + bytes(-len(d) % 512)
    b += bytes(1024)
    return b + bytes(-len(b) % 10240) + tail

def trailer(ents):
    """The trailer that lists entries ents truly."""
    es = []
    for x, d in ents:
        t = d if isinstance(x, bytes) else x
        p = t.pax_headers
        size = p.get("GNU.sparse.realsize", p.get("size", t.size))
        es.append({"name": p.get("GNU.sparse.name", t.name),
                   "size": int(size) if str(size).isdigit() else t.size,
                   "xxh3": p.get(DIGEST)})
    return reg("gpuckpt.sums", json.dumps({
        "format": 1, "entries": es, "count": len(es),
        "bytes": sum(e["size"] for e in es)}).encode())

def image(body, head=None, after=(), tail=b""):
    """The manifest (or head), body and their trailer, then after."""
    ents = [head or manifest] + list(body)
    return blob(ents + [trailer(ents)] + list(after), tail)

def zc(b):
    return subprocess.run(["zstd", "-q", "-c"], input=b, capture_output=True,
                          check=True).stdout

body = [entry(i) for i in crius]
pname, pdata = members[crius[-1]].name, datas[crius[-1]]
psize = len(pdata)

# The builder itself: a sound image, and one with a sound entry with
# holes, both of which read back.
save("built.tar", image(body))
save("built-sparse.tar", image(body[:-1] + [sparse(
    pname, psize, [(0, 8192), (12288, psize - 12288)],
    pdata[:8192] + pdata[12288:])]))

# Sound images whose manifests are hostile to a reader that shows them:
# the most processes a manifest may list, in one long chain, and
# strings with control characters.
m = json.loads(datas[0])
m["root_pid"] = 1
m["processes"] = [{"pid": i, "ppid": i - 1, "comm": "p"}
                  for i in range(1, 65537)]
m["cuda"] = None
save("many-processes.tar",
     image(body, head=reg("gpuckpt.json", json.dumps(m).encode())))
m = json.loads(datas[0])
m["created"] = "2026-11-21T09:30:12Z\x1b[2J"
m["host"]["hostname"] = "host\r\nname"
for p in m["processes"]:
    p["comm"] = "ev\x1b]0;title\x07il\nline"
    p["cmdline"] = []
save("control-strings.tar",
     image(body, head=reg("gpuckpt.json", json.dumps(m).encode())))
EOF
}

# The hostile corpus is made from two real images of one tree whose
# memory is split into parts, with holes (a private mapping of a file:
# the zero pages of anonymous memory are left out): one written
# compressed, one not (--leave-running lets the second dump see the tree
# still there), in format 1, which every reader still reads.
test_expect_success 'make the images the hostile streams are made from' '
	start_workload parts -F -m 17 -z 99 &&
	started=$WPID &&
	test_status 0 "$GCKPT" --format=1 --leave-running -c none \
	    -p $WPID -o parts.tar &&
	test_status 0 "$GCKPT" --format=1 -p $WPID -o parts.gck &&
	started= &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	tar tf parts.tar >list &&
	grep "^criu/pages-1.img.part00001\$" list &&
	test "$(sed -n \$p list)" = gpuckpt.sums
'

# And from three of format 2 of another tree: a full one, v2a.gck, the
# same signed with key, v2s.gck, and v2b.gck, made with
# --parent=v2a.gck after the tree rewrote some of its memory, so that it
# holds both chunks and references.  allowed lists key: some streams are
# refused with --allowed-signers=allowed.
test_expect_success 'make the images of format 2 the hostile streams are made from' '
	ssh-keygen -q -t ed25519 -N "" -C hostile -f key &&
	echo "hostile $(cat key.pub)" >allowed &&
	start_workload v2 -m 8 -r 10 &&
	started=$WPID &&
	test_status 0 "$GCKPT" --format=2 -R -p $WPID -o v2a.gck &&
	test_status 0 "$GCKPT" --format=2 -R --sign=key -p $WPID -o v2s.gck &&
	! grep "^rewrote " "$WSTATUS" &&
	kill -USR2 $WPID &&
	wait_for_line "$WSTATUS" "^rewrote " 30 &&
	test_status 0 "$GCKPT" --format=2 -k --parent=v2a.gck -p $WPID \
	    -o v2b.gck &&
	started= &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	zstd -dc v2b.gck | tar -xOf - gpuckpt.sums >v2b.sums &&
	grep "\"ref\"" v2b.sums &&
	test_status 0 "$GCKINSPECT" --verify --allowed-signers=allowed \
	    v2s.gck >out &&
	grep "hostile" out
'

# And from two of format 3 of a third tree: a full one, v3a.gck, and
# v3b.gck, made with --parent=v3a.gck after the tree rewrote single
# pages here and there, so that it holds patches of v3a's chunks.
test_expect_success 'make the images of format 3 the hostile streams are made from' '
	start_workload v3 -m 8 -p pages -r 3 &&
	started=$WPID &&
	test_status 0 "$GCKPT" -R -p $WPID -o v3a.gck &&
	kill -USR2 $WPID &&
	wait_for_line "$WSTATUS" "^rewrote " 30 &&
	test_status 0 "$GCKPT" -k --parent=v3a.gck -p $WPID -o v3b.gck &&
	started= &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	zstd -dc v3b.gck | tar -xOf - gpuckpt.sums >v3b.sums &&
	grep "\"patch\":true" v3b.sums
'

# A process of the test's own listens on a port of 127.0.0.1 (its
# number in the file port, without SO_REUSEADDR): some of the streams of
# the category "sockets" hold a socket listening there.
test_expect_success 'hold a port that hostile streams listen on' '
	python3 -c "import socket, sys, time
s = socket.socket()
s.bind((\"127.0.0.1\", 0))
s.listen(1)
print(s.getsockname()[1], file=open(sys.argv[1], \"w\"), flush=True)
time.sleep(3600)" port </dev/null >/dev/null 2>&1 &
	holder=$! &&
	wait_for_line port "^[0-9][0-9]*\$" 30
'

# tests/hostile.py makes the streams and runs each through gpurestore
# and gpuinspect; it writes one line per category, "ok" or "not ok",
# and says on stderr (in the log) which runs failed, and why.
test_expect_success 'the hostile streams' '
	mkdir hostile &&
	python3 "$GCK_SRCDIR/hostile.py" --bindir "$GCK_BINDIR" \
	    --runone "$GCK_TESTDIR/runone" \
	    --trash "$TRASH/hostile" --min 1020 --v2 v2a.gck,v2b.gck \
	    --v3 v3a.gck,v3b.gck \
	    --signed v2s.gck,key,allowed --port "$(cat port)" \
	    parts.gck parts.tar \
	    >hostile.out &&
	grep "	sockets	" hostile.out
'

test_expect_success 'let go of the port' '
	kill_tree $holder &&
	holder=
'

while IFS='	' read -r _ok _cat _what; do
	test_expect_success "hostile streams: $_cat: $_what" "
		test '$_ok' = ok
	"
done <hostile.out

# inspect MODE IMAGE: runs gpuinspect on IMAGE, a file in $TRASH or
# "|FILE" for FILE through a pipe, in MODE: verify, extract (into dir,
# which does not exist), extract-into (into dir, which exists and is
# empty), diff (good.gck with IMAGE), rdiff (IMAGE with good.gck), same
# (IMAGE with itself), show or json.  It runs in the empty directory
# work, in 1 GiB of memory (limit_memory), and is stopped after 30
# seconds (and killed 5 seconds later); out and err get its output, $_st
# its status.
inspect() {
	case $2 in
	"|"*)	_in=- ;;
	*)	_in=$TRASH/$2 ;;
	esac
	case $1 in
	verify)		set -- "$2" --verify "$_in" ;;
	extract)	set -- "$2" --extract=dir "$_in" ;;
	extract-into)	mkdir work/dir && set -- "$2" --extract=dir "$_in" ;;
	diff)		set -- "$2" --diff "$TRASH/good.gck" "$_in" ;;
	rdiff)		set -- "$2" --diff "$_in" "$TRASH/good.gck" ;;
	same)		set -- "$2" --diff "$_in" "$_in" ;;
	show)		set -- "$2" "$_in" ;;
	json)		set -- "$2" --json "$_in" ;;
	esac
	_img=$1
	shift
	(
		cd work && limit_memory 1024 || exit 99
		case $_img in
		"|"*)	cat "$TRASH/${_img#|}" |
			    timeout -k 5 30 "$GCKINSPECT" "$@" ;;
		*)	exec timeout -k 5 30 "$GCKINSPECT" "$@" ;;
		esac
	) >out 2>err
	_st=$?
}

# status_words STATUS: what the exit status of a run of inspect says.
status_words() {
	case $1 in
	124)	echo "timed out" ;;
	137)	echo "timed out, then killed: it ignored SIGTERM" ;;
	*)	test "$1" -gt 128 &&
		    echo "killed by signal $(($1 - 128))" ||
		    echo "exited $1" ;;
	esac
}

# inspect_failed WHY: says why a run of gpuinspect failed and shows its
# output; clears work and $TMPDIR for the next.
inspect_failed() {
	echo >&2 "gpuinspect $1"
	echo >&2 "stdout:"
	head -c 1000 out | cat -v >&2
	echo >&2 "stderr:"
	head -c 1000 err | cat -v >&2
	rm -rf work "$TMPDIR" && mkdir work "$TMPDIR"
	return 1
}

# inspect_shows MODE IMAGE: gpuinspect's summary (MODE show or json) of
# IMAGE is that of the undamaged image, as good.MODE holds it.
inspect_shows() {
	inspect "$@"
	test $_st -eq 0 && test ! -s err && test_cmp good.$1 out &&
	    return 0
	inspect_failed "$1 $2: $(status_words $_st)"
}

# inspect_succeeds MODE IMAGE: gpuinspect in MODE (see inspect) exits 0
# in time, without a word on stderr.
inspect_succeeds() {
	inspect "$@"
	test $_st -eq 0 && test ! -s err && return 0
	inspect_failed "$1 $2: $(status_words $_st)"
}

# json_member FILE KEY: member KEY of the JSON object in FILE.
json_member() {
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# relay FILE COUNT: writes FILE on stdout, 64 KiB at a time, until the
# reader goes away; COUNT gets how many bytes it could write.
relay() {
	python3 - "$@" <<'EOF'
import os, sys

n = 0
with open(sys.argv[1], "rb") as f:
    try:
        while True:
            b = memoryview(f.read(65536))
            if not b:
                break
            while b:
                k = os.write(1, b)
                n += k
                b = b[k:]
    except BrokenPipeError:
        pass
with open(sys.argv[2], "w") as f:
    print(n, file=f)
EOF
}

test_expect_success 'make an image of a small workload' '
	start_workload src -m 8 &&
	started=$WPID &&
	test_status 0 "$GCKPT" --format=1 -p $WPID -o good.gck &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	zstd -dc good.gck >good.tar &&
	tar tf good.tar >list &&
	test "$(sed -n \$p list)" = gpuckpt.sums
'

test_expect_success 'the head of the image, and its summaries' '
	mkdir work &&
	inspect json "|good.gck" &&
	test $_st -eq 0 && test_must_be_empty err &&
	mv out good.json &&
	test "$(json_member good.json root_pid)" = $WPID &&
	inspect show "|good.gck" &&
	test $_st -eq 0 && test_must_be_empty err &&
	mv out good.show &&
	inspect_shows json "|good.tar" &&
	inspect_shows show "|good.tar"
'

test_expect_success 'make sound streams' '
	mkdir evil &&
	sound evil
'

test_expect_success 'the streams built here read back when sound' '
	inspect_succeeds verify evil/built.tar &&
	inspect_succeeds same evil/built.tar &&
	test_must_be_empty out &&
	inspect_succeeds verify evil/built-sparse.tar
'

test_expect_success 'gpuinspect: a manifest of 65536 processes, in time' '
	inspect_succeeds json evil/many-processes.tar &&
	test "$(json_member out root_pid)" = 1 &&
	inspect_succeeds show evil/many-processes.tar &&
	test "$(sed "1,/^PID/d" out | wc -l)" -eq 65536 &&
	inspect_succeeds same evil/many-processes.tar &&
	test_must_be_empty out
'

test_expect_success 'gpuinspect shows no control characters of a manifest' '
	inspect_succeeds show evil/control-strings.tar &&
	if test "$(wc -l <out)" -ne "$(wc -l <good.show)" ||
	    LC_ALL=C tr -d "\n" <out | LC_ALL=C grep -q "[[:cntrl:]]"; then
		inspect_failed \
		    "show evil/control-strings.tar: control characters"
	fi
'

test_expect_success 'the image rewritten by another tar writer restores' '
	test_status 0 "$GCKRESTORE" evil/rewritten.tar >out &&
	echo $WPID >expect &&
	test_cmp expect out &&
	proc_running $WPID &&
	verify_workload $WPID &&
	kill_tree $WPID
'

test_expect_success 'the undamaged image restores' '
	test_status 0 "$GCKRESTORE" good.gck >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_must_be_empty err &&
	proc_running $WPID &&
	proc_running $WCHILD &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'make a larger image' '
	start_workload big -m 64 &&
	started="$started $WPID" &&
	test_status 0 "$GCKPT" -p $WPID -o big.gck &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test "$(wc -c <big.gck)" -gt 16777216
'

test_expect_success 'the summary reads only the head of the image' '
	zstd -dc big.gck | tar xOf - gpuckpt.json >manifest &&
	test "$(json_member manifest root_pid)" = $WPID &&
	relay big.gck count | timeout -k 5 30 "$GCKINSPECT" --json >out 2>err &&
	test_must_be_empty err &&
	test "$(cat count)" -lt 1048576 &&
	test "$(json_member out root_pid)" = $WPID &&
	relay big.gck count | timeout -k 5 30 "$GCKINSPECT" >out 2>err &&
	test_must_be_empty err &&
	test "$(cat count)" -lt 1048576 &&
	grep "^processes .*, root $WPID" out
'

test_done
