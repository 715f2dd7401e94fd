#!/bin/sh
test_description='bash completion of the five commands'
. "$GCK_SRCDIR/lib.sh"

: "${GCK_TOPSRCDIR:?GCK_TOPSRCDIR is not set: run the tests through make check}"
COMPLETION=$GCK_TOPSRCDIR/completion/gpuckpt.bash
BASH=$(command -v bash) || test_skip_all "bash not found"

# comp.bash SCRIPT LINE: prints what a TAB at the end of LINE offers, one
# a line.  Without bash-completion, and under set -u.  COMP_WORDS is
# split as bash splits it: at blanks, and around the characters of
# COMP_WORDBREAKS "=", ":", "@", "<" and ">".
cat >comp.bash <<'EOF'
COMP_WORDBREAKS=$' \t\n"\'@><=;|&(:'
. "$1" || exit 3
set -u
line=$2
COMP_WORDS=()
set -f
for w in $line; do
	while [[ -n $w ]]; do
		[[ $w =~ ^([=:@]+|[\<\>]+|[^=:@\<\>]+)(.*)$ ]] || exit 3
		COMP_WORDS+=("${BASH_REMATCH[1]}")
		w=${BASH_REMATCH[2]}
	done
done
set +f
[[ -z $line || $line == *[[:space:]] ]] && COMP_WORDS+=("")
COMP_LINE=$line
COMP_POINT=${#line}
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
spec=$(complete -p "${COMP_WORDS[0]}") || exit 3
[[ $spec == *' -F '* ]] || exit 3
func=${spec#* -F }
func=${func%% *}
COMPREPLY=()
"$func" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" \
    "${COMP_WORDS[COMP_CWORD - 1]-}" || exit 3
((${#COMPREPLY[@]} == 0)) || printf '%s\n' "${COMPREPLY[@]}"
EOF

# comp LINE: completes LINE into ./out, sorted; fails on any message.
comp() {
	"$BASH" ./comp.bash "$COMPLETION" "$1" >out.raw 2>err
	_st=$?
	test_must_be_empty err && test $_st -eq 0 &&
	sort out.raw >out
}

# offers WORD...: each WORD is a line of ./out.
offers() {
	for _w in "$@"; do
		grep -x -F -e "$_w" out >/dev/null && continue
		echo >&2 "'$_w' is not offered:"
		cat >&2 out
		return 1
	done
}

# offers_not WORD...: no WORD is a line of ./out.
offers_not() {
	for _w in "$@"; do
		grep -x -F -e "$_w" out >/dev/null || continue
		echo >&2 "'$_w' is offered:"
		cat >&2 out
		return 1
	done
}

# offers_exactly WORD...: ./out holds the WORDs and nothing else.
offers_exactly() {
	printf '%s\n' "$@" | sort >expect &&
	test_cmp expect out
}

# The long options of an option table (those of a manual page:
# man_longopts, in lib.sh).
src_longopts() {
	sed -n '/longopts\[\] = {/,/^};/s/^[[:space:]]*{ "\([^"]*\)".*/--\1/p' \
	    "$1"
}

test_expect_success 'the script defines a completion for each command' '
	"$BASH" -c ". \"\$1\" && complete -p gpuckpt gpurestore gpusend \
	    gpurecv gpuinspect" sh "$COMPLETION" >out 2>err &&
	test_must_be_empty err &&
	test_line_count out 5 &&
	test_grep "^complete -F _gpuinspect gpuinspect\$" out
'

for prog in ckpt/gpuckpt restore/gpurestore send/gpusend recv/gpurecv \
    inspect/gpuinspect; do
	name=${prog#*/}
	src=$GCK_TOPSRCDIR/src/$prog.c
	page=$GCK_MANDIR/$name.1

	test_expect_success "$name --: every long option of $name.c" "
		src_longopts '$src' >opts &&
		test_grep '^--help\$' opts &&
		comp '$name --' &&
		offers \$(cat opts)
	"

	test_expect_success "$name --: every long option of $name.1" "
		man_longopts '$page' >opts &&
		test_grep '^--help\$' opts &&
		comp '$name --' &&
		offers \$(cat opts)
	"

	test_expect_success "$name -: the long options" "
		comp '$name --' &&
		mv out out.ddash &&
		comp '$name -' &&
		test_cmp out.ddash out
	"
done

test_expect_success 'gpuinspect: the options it is extended to' '
	comp "gpuinspect --" &&
	offers_exactly --allowed-signers --check --diff --env --extract \
	    --files --flatten --help --json --parent --sockets --verbose \
	    --verify --version
'

test_expect_success 'a prefix narrows the options' '
	comp "gpuinspect --ve" &&
	offers_exactly --verbose --verify --version &&
	comp "gpuckpt --s" &&
	offers_exactly --series --sign --stats --stop --suspend &&
	comp "gpurestore --pid" &&
	offers_exactly --pid --pidfile --pidns &&
	comp "gpuckpt --comp" &&
	offers_exactly --compress &&
	comp "gpuckpt --nosuch" &&
	test_must_be_empty out
'

test_expect_success 'no options after --' '
	: >./--odd &&
	comp "gpurestore -- --" &&
	offers_exactly --odd &&
	comp "gpuckpt -- " &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt and gpurecv take no operand: the options' '
	comp "gpuckpt " &&
	offers --pid --compress &&
	offers_not comp.bash &&
	comp "gpurecv " &&
	offers --restore --outcome --join --resume &&
	offers_not comp.bash
'

# A process of ours, and a pid that existed a moment ago and is gone.
sleep 300 </dev/null >/dev/null 2>&1 &
spid=$!
test_cleanup() { kill $spid 2>/dev/null; wait $spid 2>/dev/null; }
sh -c 'exit 0' &
deadpid=$!
wait $deadpid

for line in 'gpuckpt -p ' 'gpuckpt --pid ' 'gpuckpt --pid=' \
    'gpuckpt -vp ' 'gpuckpt --pi ' 'gpurestore --resume -p '; do
	test_expect_success "$line: running pids" "
		comp '$line' &&
		offers $spid 1 &&
		offers_not $deadpid comp.bash --pid
	"
done

# A kernel thread: a process without a command line that is no zombie
# (kthreadd, PID 2, and its children, where this /proc shows them).
kthread=
for d in /proc/[0-9]*; do
	test -r "$d/cmdline" && test -r "$d/stat" || continue
	test -z "$(tr -d '\0' <"$d/cmdline" 2>/dev/null)" || continue
	st=$(sed 's/.*) \(.\).*/\1/' "$d/stat" 2>/dev/null)
	test "$st" != Z || continue
	kthread=${d#/proc/}
	break
done

test_expect_success 'gpuckpt -p : no kernel thread' '
	if test -z "$kthread"; then
		echo >&2 "no kernel thread to be seen in /proc" && return 0
	fi &&
	comp "gpuckpt -p " &&
	offers $spid &&
	offers_not $kthread &&
	comp "gpusend -p $kthread" &&
	offers_not $kthread &&
	if test "$(cat /proc/2/comm 2>/dev/null)" = kthreadd; then
		comp "gpuckpt --pid=" &&
		offers_not 2
	fi
'

test_expect_success 'gpuckpt -p NAME: the pids of the processes of that name' '
	comp "gpuckpt -p slee" &&
	offers $spid &&
	! grep -v "^[0-9][0-9]*\$" out &&
	comp "gpusend --pid=slee" &&
	offers $spid &&
	comp "gpuckpt -p no-such-command-name" &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt -p PID: the pids that begin with PID' '
	comp "gpuckpt -p $spid" &&
	offers $spid &&
	! grep -v "^$spid" out
'

test_expect_success '--stats=: the forms, and --stats takes no next word' '
	for p in gpuckpt gpurestore gpusend; do
		comp "$p --stats=" &&
		offers_exactly text json &&
		comp "$p --stats=j" &&
		offers_exactly json || return 1
	done &&
	comp "gpurestore --stats " &&
	offers tmp &&
	offers_not text json &&
	comp "gpuckpt --stats --q" &&
	offers_exactly --quiet
'

test_expect_success 'gpuckpt --compress=: the methods' '
	comp "gpuckpt --compress=" &&
	offers zstd none zstd:1 zstd:3 zstd:19 &&
	offers_not zstd:0 zstd:20 gzip &&
	test_line_count out 21
'

test_expect_success 'gpuckpt -c and --compress ARG: the methods' '
	comp "gpuckpt -c " &&
	offers zstd none &&
	comp "gpuckpt --compress n" &&
	offers_exactly none &&
	comp "gpuckpt --comp=n" &&
	offers_exactly none
'

test_expect_success 'gpuckpt --compress=zstd:: the levels, after the colon' '
	comp "gpuckpt --compress=zstd:" &&
	offers_exactly 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 &&
	comp "gpuckpt -c zstd:1" &&
	offers_exactly 1 10 11 12 13 14 15 16 17 18 19
'

test_expect_success 'arguments that have nothing to complete' '
	comp "gpuckpt --lock-timeout " &&
	test_must_be_empty out &&
	comp "gpuckpt --series=s --every " &&
	test_must_be_empty out &&
	comp "gpuckpt --keep=" &&
	test_must_be_empty out &&
	comp "gpurestore --gpu-map " &&
	test_must_be_empty out &&
	comp "gpurestore --gpu-map=" &&
	test_must_be_empty out
'

test_expect_success 'files for the test' '
	mkdir adir &&
	: >afile &&
	: >job.gck &&
	: >"two words.gck"
'

for line in 'gpuinspect --extract ' 'gpuinspect --extract=' \
    'gpuinspect -x ' 'gpuinspect -vx ' 'gpuinspect job.gck -x ' \
    'gpuckpt --series ' 'gpuckpt --series=' 'gpuckpt -p 1 --ser '; do
	test_expect_success "$line: directories" "
		comp '$line' &&
		offers adir &&
		offers_not afile job.gck
	"
done

test_expect_success 'gpuinspect --extract=a: the directory' '
	comp "gpuinspect --extract=a" &&
	offers_exactly adir
'

for line in 'gpurestore ' 'gpuinspect ' 'gpuinspect -d ' \
    'gpuinspect -d job.gck ' 'gpuinspect --diff afile ' \
    'gpuinspect -vd job.gck ' 'gpurestore -v -- ' 'gpusend ' \
    'gpusend -v '; do
	test_expect_success "$line: images and directories" "
		comp '$line' &&
		offers job.gck adir 'two words.gck' &&
		offers_not afile --help
	"
done

test_expect_success 'an image operand that matches no image: any file' '
	comp "gpurestore af" &&
	offers_exactly afile &&
	comp "gpuinspect -d job.gck af" &&
	offers_exactly afile &&
	comp "gpusend af" &&
	offers afile
'

for line in 'gpuckpt -o ' 'gpuckpt --output=' \
    'gpurestore --pidfile ' 'gpurestore -P ' \
    'gpuckpt -p 1 >' 'gpuckpt -p 1 > ' 'gpurestore <'; do
	test_expect_success "$line: files" "
		comp '$line' &&
		offers afile job.gck adir 'two words.gck' &&
		offers_not --help
	"
done

test_expect_success 'a file operand narrows' '
	comp "gpurestore jo" &&
	offers_exactly job.gck &&
	comp "gpuinspect --verify tw" &&
	offers_exactly "two words.gck"
'

for line in 'gpurestore job.gck ' 'gpuinspect job.gck ' \
    'gpuinspect -d job.gck afile '; do
	test_expect_success "$line: no more operands" "
		comp '$line' &&
		offers_not afile job.gck &&
		offers --help
	"
done

test_expect_success 'gpusend: hosts from ~/.ssh' '
	mkdir -p home/.ssh &&
	cat >home/.ssh/config <<-\EOF &&
	Host alpha beta-*
	    HostName alpha.example
	Host=omega
	EOF
	cat >home/.ssh/known_hosts <<-\EOF &&
	gamma.example,10.0.0.1 ssh-ed25519 AAAA
	[delta.example]:2222 ssh-ed25519 AAAA
	|1|c2FsdA==|aGFzaA== ssh-ed25519 AAAA
	EOF
	HOME=$TRASH/home comp "gpusend " &&
	offers alpha omega gamma.example 10.0.0.1 delta.example &&
	offers_not "beta-*" "[delta.example]:2222" "|1|c2FsdA==|aGFzaA==" &&
	HOME=$TRASH/home comp "gpusend root@ga" &&
	offers gamma.example &&
	! grep -v "^ga" out
'

test_expect_success 'gpusend: no hashed entries, no wildcards, user@ kept' '
	mkdir -p home2/.ssh &&
	cat >home2/.ssh/config <<-\EOF &&
	Host zeta ?eta !theta eta* # a comment
	  User someone
	Match host iota
	host kappa
	EOF
	cat >home2/.ssh/known_hosts <<-\EOF &&
	# a comment
	lambda,[mu.example]:2200,192.0.2.7 ssh-ed25519 AAAA
	@cert-authority *.example ssh-ed25519 AAAA
	@revoked nu.example ssh-ed25519 AAAA
	|1|bm90aGluZw==|aGFzaGVk ssh-rsa AAAA
	EOF
	HOME=$TRASH/home2 comp "gpusend -p 1 " &&
	offers zeta kappa lambda mu.example 192.0.2.7 nu.example &&
	offers_not "?eta" "!theta" "eta*" iota "*.example" \
	    "|1|bm90aGluZw==|aGFzaGVk" "[mu.example]:2200" someone &&
	! grep "^|" out &&
	HOME=$TRASH/home2 comp "gpusend -p 1 me@k" &&
	offers kappa &&
	! grep -v "^k" out &&
	HOME=$TRASH/home2 comp "gpusend job.gck me@" &&
	offers zeta lambda &&
	HOME=$TRASH/home2 comp "gpusend --pid=1 lam" &&
	offers_exactly lambda
'

# A stand-in ssh, first in PATH, that logs its arguments and lists what
# ls would there: the completion script is under test, not ssh.
mkdir -p stub &&
cat >stub/ssh <<\EOF
#!/bin/sh
printf '%s\n' "$*" >>"$TRASH/ssh.log"
case "$*" in
*"ls -d -p -- /srv/im*"*) printf '%s\n' /srv/images/ /srv/img.gck ;;
*"ls -d -p -- *"*) printf '%s\n' job.gck data/ ;;
esac
EOF
chmod +x stub/ssh
export TRASH

test_expect_success 'gpusend FILE host:path: the remote paths' '
	: >ssh.log &&
	PATH=$TRASH/stub:$PATH comp "gpusend job.gck gpu2:/srv/im" &&
	offers /srv/images/ /srv/img.gck &&
	test_grep "BatchMode=yes" ssh.log &&
	test_grep " gpu2 " ssh.log &&
	PATH=$TRASH/stub:$PATH comp "gpusend job.gck me@gpu2:" &&
	offers job.gck data/ &&
	test_grep " me@gpu2 " ssh.log &&
	PATH=$TRASH/stub:$PATH comp "gpusend job.gck [2001:db8::7]:/srv/im" &&
	offers /srv/images/ &&
	test_grep " 2001:db8::7 " ssh.log
'

test_expect_success 'gpusend: no ssh until host: is typed, none with -p' '
	: >ssh.log &&
	PATH=$TRASH/stub:$PATH comp "gpusend job.gck gpu" &&
	PATH=$TRASH/stub:$PATH comp "gpusend -p 1 gpu2:/srv/im" &&
	PATH=$TRASH/stub:$PATH comp "gpusend job.gck" &&
	test_must_be_empty ssh.log
'

# The install from this build tree, into a scratch DESTDIR.
if test "$GCK_BASHCOMPDIR" = no; then
	test_expect_success 'no completion installed (--without-bash-completion-dir)' '
		true
	'
else
	inst=$TRASH/inst
	dir=$inst$GCK_BASHCOMPDIR
	test_expect_success 'make install puts the script and its links' '
		(unset MAKEFLAGS MFLAGS MAKELEVEL
		    ${GCK_MAKE:-make} -C "$GCK_TOPBUILDDIR" install \
		    DESTDIR="$inst") >install.log 2>&1 &&
		test -f "$dir/gpuckpt" && ! test -h "$dir/gpuckpt" &&
		test_cmp "$COMPLETION" "$dir/gpuckpt" &&
		for n in gpurestore gpusend gpurecv gpuinspect; do
			readlink "$dir/$n"
		done >links &&
		printf "gpuckpt\n" >expect &&
		cat expect expect expect expect >expect4 &&
		test_cmp expect4 links
	'

	test_expect_success 'make uninstall removes them' '
		(unset MAKEFLAGS MFLAGS MAKELEVEL
		    ${GCK_MAKE:-make} -C "$GCK_TOPBUILDDIR" uninstall \
		    DESTDIR="$inst") >uninstall.log 2>&1 &&
		find "$inst" ! -type d >left &&
		test_must_be_empty left
	'
fi

test_done
