# bash completion for gpuckpt, gpurestore, gpusend, gpurecv and gpuinspect
#
# Installed as "gpuckpt" in bash-completion's completions directory, with
# the other four names as links to it, so that bash-completion loads it
# for whichever of the commands is completed first.  It can also be
# sourced on its own, for example from ~/.bashrc: it needs nothing but
# bash.  Where bash-completion is loaded, its _filedir and
# _known_hosts_real complete file and host names.
#
# The options follow the getopt_long tables of src/*/*.c and the manual
# pages; keep them in step (tests/t-completion.sh checks).

# _gck_opts PROG: describes the command line of PROG in
#	long		its long options
#	longarg		those of them that take an argument, and the
#			pseudo-long name of a short option without a long
#			one that takes an argument ("-o")
#	longopt		those that take an optional argument: only as
#			--name=ARG
#	short		its short options, each as LETTER=LONG
#	mode		the option that changes the operands (--diff,
#			--pid), or nothing
#	operand		what an operand is: file, host, send (gpusend's
#			file then host, or with --pid only a host) or none
#	maxop		how many operands it takes, without and with the
#			mode option (-1: any number)
# Returns 1 for a PROG it does not know.
_gck_opts()
{
	case $1 in
	gpuckpt)
		long='--compress --count --cut --cut-name --cut-size --every
		    --ext-unix-sk --file-locks
		    --format --full-every --ghost-limit --gpu-staging --help --keep
		    --kill --launch
		    --leave-running
		    --lock-timeout --nccl-timeout --now --output --parent --pid
		    --quiet --series
		    --sign --stats --stop --suspend --tcp-close
		    --tcp-established --threads
		    --verbose --version'
		longarg='--compress --count --cut --cut-name --cut-size --every
		    --format --full-every
		    --ghost-limit --keep --lock-timeout --nccl-timeout --output
		    --parent --pid --series
		    --sign --threads'
		longopt=--stats
		short='c=--compress h=--help k=--kill o=--output p=--pid
		    q=--quiet R=--leave-running s=--stop V=--version
		    v=--verbose'
		operand=none
		maxop='0 0'
		;;
	gpurestore)
		long='--allowed-signers --gpu-map --help --mount-map --parent
		    --pid --pidfile --pidns --quiet --resume --root --stats
		    --tcp-close --threads --verbose --version --wait'
		longarg='--allowed-signers --gpu-map --mount-map --parent --pid
		    --pidfile --root --threads'
		longopt=--stats
		short='h=--help M=--mount-map p=--pid P=--pidfile q=--quiet
		    V=--version v=--verbose'
		operand=file
		maxop='1 1'
		;;
	gpusend)
		long='--accept-new --bwlimit --cache --cache-size --compress
		    --ext-unix-sk --file-locks --ghost-limit --gpu-map --help
		    --identity --live --lock-timeout --max-rounds --mount-map
		    --no-cache --parallel --pid --port --quiet --remote-path
		    --resume --root --sign --stats --tcp-close
		    --tcp-established --timeout --verbose --version'
		longarg='--bwlimit --cache --cache-size --compress
		    --ghost-limit --gpu-map --identity --lock-timeout --max-rounds
		    --mount-map --parallel --pid --port --remote-path --root
		    --sign --timeout -o'
		longopt=--stats
		short='c=--compress h=--help i=--identity M=--mount-map o=-o
		    P=--port p=--pid q=--quiet V=--version v=--verbose'
		mode=--pid
		operand=send
		maxop='2 1'
		;;
	gpurecv)
		# Run by gpusend; by hand, only --outcome: its path operand
		# is not completed.
		long='--allowed-signers --cache --cache-size --gpu-map --help
		    --id --join --mount-map --name --no-cache --outcome --pages
		    --restore --resume --root --streams --tcp-close --timeout
		    --to-cache --verbose --version'
		longarg='--allowed-signers --cache --cache-size --gpu-map --id
		    --join --mount-map --name --outcome --root --streams
		    --timeout'
		short='h=--help V=--version v=--verbose'
		operand=none
		maxop='0 0'
		;;
	gpuinspect)
		long='--allowed-signers --check --diff --env --extract --files
		    --flatten --help --json --parent --sockets --verbose --verify
		    --version'
		longarg='--allowed-signers --extract --flatten --parent'
		short='d=--diff h=--help j=--json t=--verify V=--version
		    v=--verbose x=--extract'
		mode=--diff
		operand=file
		maxop='1 2'
		;;
	*)
		return 1
		;;
	esac
}

# _gck_words: rejoins what bash split at "=", ":" and "@" (characters of
# COMP_WORDBREAKS) into the words the command sees: words, cword, and
# cur, the current word up to the cursor.
_gck_words()
{
	local line=${COMP_LINE-} pos=0 gap i n=-1 start=0 w

	words=()
	cword=0
	for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
		w=${COMP_WORDS[i]}
		gap=${line:pos}
		gap=${gap%%[![:space:]]*}
		pos=$((pos + ${#gap}))
		if [[ ${line:pos:${#w}} != "$w" ]]; then
			gap=' '		# COMP_LINE does not match: split here
		fi
		if ((n >= 0)) && [[ -z $gap ]] &&
		    [[ $w == [=:@]* || ${words[n]} == *[=:@] ]]; then
			words[n]+=$w
		else
			n=$((n + 1))
			words[n]=$w
			((i <= ${COMP_CWORD-0})) && start=$pos
		fi
		((i == ${COMP_CWORD-0})) && cword=$n
		pos=$((pos + ${#w}))
	done
	cur=${words[cword]-}
	if [[ -n ${COMP_POINT-} ]] && ((COMP_POINT >= start)); then
		w=${line:start:COMP_POINT-start}
		[[ $cur == "$w"* ]] && cur=$w
	fi
}

# _gck_lead WORD: sets lead to the part of WORD that bash took as earlier
# words, up to its last "=", ":" or "@" found in COMP_WORDBREAKS.  What
# COMPREPLY offers replaces only the rest.
_gck_lead()
{
	local i=${#1} c

	while ((i > 0)); do
		c=${1:i-1:1}
		[[ $c == [=:@] && ${COMP_WORDBREAKS-} == *"$c"* ]] && break
		i=$((i - 1))
	done
	lead=${1:0:i}
}

# _gck_reply PREFIX CUR WORD...: offers those WORDs that begin with CUR;
# PREFIX is what stands before CUR in the same word ("--pid=").
_gck_reply()
{
	local pfx=$1 cur=$2 lead w

	shift 2
	_gck_lead "$pfx$cur"
	for w; do
		[[ $w == "$cur"* ]] || continue
		w=$pfx$w
		COMPREPLY+=("${w#"$lead"}")
	done
}

# _gck_long NAME: sets opt to the long option that NAME is or abbreviates
# without ambiguity, as getopt_long takes it, or to nothing.
_gck_long()
{
	local o m=()

	opt=
	for o in $long; do
		if [[ $o == "$1" ]]; then
			opt=$o
			return
		fi
		[[ $o == "$1"* ]] && m+=("$o")
	done
	((${#m[@]} == 1)) && opt=${m[0]}
}

# _gck_short LETTER: sets opt to the long option of a short one, or to
# nothing.
_gck_short()
{
	local s

	opt=
	for s in $short; do
		if [[ ${s%%=*} == "$1" ]]; then
			opt=${s#*=}
			return
		fi
	done
}

# _gck_takes OPT: whether the long option OPT takes an argument.
_gck_takes()
{
	local o

	for o in $longarg; do
		[[ $o == "$1" ]] && return 0
	done
	return 1
}

# _gck_files PREFIX CUR [-d | -i]: offers files, or directories with -d,
# or with -i images: directories (a series, or on the way to an image)
# and *.gck files, or, when none of those match, any file.
_gck_files()
{
	local pfx=$1 cur=$2 lead w f r=()

	if declare -F _filedir >/dev/null; then
		COMPREPLY=()
		case ${3-} in
		-d)	_filedir -d ;;
		-i)	_filedir gck
			((${#COMPREPLY[@]})) || _filedir ;;
		*)	_filedir ;;
		esac
		r=("${COMPREPLY[@]}")
		COMPREPLY=()
	else
		compopt -o filenames 2>/dev/null
		case $cur in
		\'*)	w=${cur#\'} ;;
		\"*)	w=${cur#\"} ;;
		*)	w=${cur//\\/} ;;
		esac
		case ${3-} in
		-d)	mapfile -t r < <(compgen -d -- "$w") ;;
		-i)	while IFS= read -r f; do
				[[ $f == *.gck || -d $f ]] && r+=("$f")
			done < <(compgen -f -- "$w")
			((${#r[@]})) || mapfile -t r < <(compgen -f -- "$w") ;;
		*)	mapfile -t r < <(compgen -f -- "$w") ;;
		esac
	fi
	_gck_lead "$pfx$cur"
	for w in ${r[@]+"${r[@]}"}; do
		w=$pfx$w
		COMPREPLY+=("${w#"$lead"}")
	done
}

# _gck_pids PREFIX CUR: offers the IDs of the running user processes,
# those that have a command line: not kernel threads, nor zombies.  A
# CUR that is not a number is matched against the command names: the
# IDs of the processes whose name begins with it are offered.
_gck_pids()
{
	local p c lead pids=() named=0

	[[ -n $2 && $2 == *[!0-9]* ]] && named=1
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $p == *[!0-9]* ]] && continue
		c=
		{ IFS= read -r -d '' c </proc/$p/cmdline; } 2>/dev/null
		[[ -n $c ]] || continue
		if ((named)); then
			c=
			{ IFS= read -r c </proc/$p/comm; } 2>/dev/null
			[[ $c == "$2"* ]] || continue
		fi
		pids+=("$p")
	done
	if ((named)); then
		_gck_lead "$1$2"
		for p in "${pids[@]}"; do
			p=$1$p
			COMPREPLY+=("${p#"$lead"}")
		done
		return
	fi
	_gck_reply "$1" "$2" "${pids[@]}"
}

# _gck_hosts PREFIX CUR: offers the hosts of ~/.ssh/config and of the
# known_hosts files, after a "user@" if CUR has one.
_gck_hosts()
{
	local f k v h user= hosts=() a

	if declare -F _known_hosts_real >/dev/null; then
		COMPREPLY=()
		_known_hosts_real -a -- "$2"
		hosts=("${COMPREPLY[@]}")
		COMPREPLY=()
		_gck_reply "$1" "$2" "${hosts[@]}"
		return
	fi
	[[ $2 == *@* ]] && user=${2%%@*}@
	for f in ~/.ssh/config /etc/ssh/ssh_config; do
		[[ -r $f ]] || continue
		while read -r k v; do
			if [[ $k == *=* ]]; then
				v="${k#*=} $v"
				k=${k%%=*}
			fi
			[[ ${k,,} == host ]] || continue
			read -ra a <<<"${v%%#*}"
			for h in "${a[@]}"; do
				[[ $h == *[*?!]* ]] || hosts+=("$user$h")
			done
		done <"$f"
	done
	for f in ~/.ssh/known_hosts /etc/ssh/ssh_known_hosts; do
		[[ -r $f ]] || continue
		while read -r k v; do
			[[ $k == @* ]] && k=${v%%[[:space:]]*}
			[[ -z $k || $k == [\#\|]* ]] && continue
			IFS=, read -ra a <<<"$k"
			for h in "${a[@]}"; do
				h=${h#\[}
				h=${h%\]:*}
				[[ -z $h || $h == *[*?!]* ]] || hosts+=("$user$h")
			done
		done <"$f"
	done
	_gck_reply "$1" "$2" "${hosts[@]}"
}

# _gck_remote PREFIX CUR: offers the paths on the host of CUR, which is
# [user@]host:path, as scp's completion does: through ssh in batch mode,
# so that it never asks for a password, and only once "host:" is typed.
_gck_remote()
{
	local dest=${2%%:*} path=${2#*:} q lead w r=()

	if [[ $2 == *\]:* ]]; then		# [address]:path
		dest=${2%%\]:*}]
		path=${2#*\]:}
	fi
	[[ $dest == *\[*\] ]] && { dest=${dest/\[/}; dest=${dest%\]}; }
	[[ -n $dest ]] || return 0
	# Quote all but the star for the remote shell; ~ stays literal, as
	# gpusend takes it.
	printf -v q '%q' "$path"
	[[ -n $path ]] || q=
	mapfile -t r < <(ssh -o BatchMode=yes -o ConnectTimeout=5 \
	    -- "$dest" "command ls -d -p -- $q*" 2>/dev/null </dev/null)
	_gck_lead "$1$2"
	for w in ${r[@]+"${r[@]}"}; do
		[[ -n $w ]] || continue
		[[ $w == */ ]] && compopt -o nospace 2>/dev/null
		w=$1${2%"$path"}$w
		COMPREPLY+=("${w#"$lead"}")
	done
	return 0
}

# _gck_arg PROG OPT PREFIX CUR: offers the arguments of OPT.
_gck_arg()
{
	local l z=()

	case $1$2 in
	gpuckpt--compress|gpusend--compress)
		for ((l = 1; l <= 19; l++)); do
			z+=("zstd:$l")
		done
		_gck_reply "$3" "$4" none zstd "${z[@]}"
		;;
	gpuinspect--extract|gpurecv--cache|gpuckpt--series|gpuckpt--cut)
		_gck_files "$3" "$4" -d
		;;
	gpuckpt--format)
		_gck_reply "$3" "$4" 1 2 3
		;;
	*--stats)
		_gck_reply "$3" "$4" text json
		;;
	*--output|*--pidfile|*--parent|*--sign|*--allowed-signers|\
	gpuinspect--flatten|gpusend--identity)
		_gck_files "$3" "$4"
		;;
	*--pid)
		_gck_pids "$3" "$4"
		;;
	gpusend-o)
		_gck_sshopt "$3" "$4"
		;;
	esac
	# --lock-timeout, --nccl-timeout, --timeout, --every (seconds),
	# --cut-size, --cut-name,
	# --gpu-map
	# (src=dst,...), --count, --keep, --full-every,
	# --parallel, --port, --remote-path, --threads, --cache-size,
	# --bwlimit, --max-rounds, gpusend's
	# --cache (a directory there) and gpurecv's others: nothing.
}

# _gck_sshopt PREFIX CUR: offers the NAME=VALUE arguments of gpusend -o:
# the names, then the values of those that have a few.
_gck_sshopt()
{
	local name

	if [[ $2 != *=* ]]; then
		_gck_reply "$1" "$2" ConnectTimeout= IdentityAgent= \
		    IdentityFile= Port= StrictHostKeyChecking= User= \
		    UserKnownHostsFile=
		compopt -o nospace 2>/dev/null
		return
	fi
	name=${2%%=*}
	case ${name,,} in
	stricthostkeychecking)
		_gck_reply "$1$name=" "${2#*=}" accept-new yes
		;;
	identityagent)
		_gck_files "$1$name=" "${2#*=}"	# first: it clears
		_gck_reply "$1$name=" "${2#*=}" none
		;;
	identityfile|userknownhostsfile)
		_gck_files "$1$name=" "${2#*=}"
		;;
	esac
}

# _gck_complete PROG: completes the command line of PROG.
_gck_complete()
{
	local prog=$1 IFS=$' \t\n' words cword cur opt i j w
	local long longarg longopt= short mode= operand maxop argof= nop=0
	local ddash=0
	local inmode=0

	COMPREPLY=()
	_gck_opts "$prog" || return 0
	_gck_words

	# Walk the words before the current one as getopt_long would.
	for ((i = 1; i < cword; i++)); do
		w=${words[i]}
		if ((ddash)); then
			nop=$((nop + 1))
		elif [[ $w == -- ]]; then
			ddash=1
		elif [[ $w == --?* ]]; then
			_gck_long "${w%%=*}"
			[[ -n $mode && $opt == "$mode" ]] && inmode=1
			if [[ $w != *=* ]] && _gck_takes "$opt"; then
				i=$((i + 1))
				((i == cword)) && argof=$opt
			fi
		elif [[ $w == -?* ]]; then
			# A cluster such as -vp: the first letter that takes
			# an argument takes the rest, or the next word.
			for ((j = 1; j < ${#w}; j++)); do
				_gck_short "${w:j:1}"
				[[ -n $mode && $opt == "$mode" ]] && inmode=1
				_gck_takes "$opt" || continue
				if ((j == ${#w} - 1)); then
					i=$((i + 1))
					((i == cword)) && argof=$opt
				fi
				break
			done
		elif [[ $w == *[\<\>]* ]]; then
			i=$((i + 1))	# a redirection and its file
			((i == cword)) && argof=redirect
		elif [[ $w =~ ^[0-9]+$ && ${words[i + 1]-} == [\<\>]* ]]; then
			:		# the descriptor of a redirection
		else
			nop=$((nop + 1))
		fi
	done

	if [[ $argof == redirect ]]; then
		_gck_files "" "$cur"
		return 0
	fi
	if [[ $cur == *[\<\>] ]]; then
		_gck_files "" ""	# right after a redirection
		return 0
	fi
	if [[ -n $argof ]]; then
		_gck_arg "$prog" "$argof" "" "$cur"
		return 0
	fi
	if ((!ddash)) && [[ $cur == --*=* ]]; then
		_gck_long "${cur%%=*}"
		{ _gck_takes "$opt" || [[ " $longopt " == *" $opt "* ]]; } &&
		    _gck_arg "$prog" "$opt" "${cur%%=*}=" "${cur#*=}"
		return 0
	fi
	if ((!ddash)) && [[ $cur == -* ]]; then
		_gck_reply "" "$cur" $long
		return 0
	fi

	# An operand, if one may follow; else the options.
	set -- $maxop
	((inmode)) && shift
	if [[ $operand == none ]] || (($1 >= 0 && nop >= $1)); then
		((ddash)) || [[ -n $cur ]] || _gck_reply "" "" $long
		return 0
	fi
	case $operand in
	file)	_gck_files "" "$cur" -i ;;
	host)	_gck_hosts "" "$cur" ;;
	send)
		# gpusend FILE HOST[:PATH], or -p PID HOST.  getopt_long
		# takes -p after the operands too, so the first may be
		# either: offer both.
		local files=()
		if ((!inmode && nop == 1)) && [[ $cur == *:* ]] &&
		    [[ $cur != \[* || $cur == \[*\]:* ]]; then
			_gck_remote "" "$cur" "$prog"
			return 0
		fi
		if ((!inmode && nop == 0)); then
			_gck_files "" "$cur" -i
			files=("${COMPREPLY[@]}")
			COMPREPLY=()
		fi
		_gck_hosts "" "$cur"
		COMPREPLY=(${files[@]+"${files[@]}"} "${COMPREPLY[@]}")
		;;
	esac
	return 0
}

_gpuckpt()
{
	_gck_complete gpuckpt
}

_gpurestore()
{
	_gck_complete gpurestore
}

_gpusend()
{
	_gck_complete gpusend
}

_gpurecv()
{
	_gck_complete gpurecv
}

_gpuinspect()
{
	_gck_complete gpuinspect
}

complete -F _gpuckpt gpuckpt
complete -F _gpurestore gpurestore
complete -F _gpusend gpusend
complete -F _gpurecv gpurecv
complete -F _gpuinspect gpuinspect
