# pidfile.sh — pid files that name one process, not just a number.
# Sourced (POSIX sh) by up.sh, down.sh and containerd-private.sh.
#
# A pid alone is not an identity: after a crash or a reboot the number
# may belong to any other process, and `kill -0` would call it ours. So
# record_pid writes the pid to FILE (alone, as `cat FILE` users expect)
# and its start time (field 22 of /proc/PID/stat, clock ticks since
# boot) to FILE.start; is_ours accepts a pid only while the same process
# runs (same start time) with the command line we started it with.
#
#   record_pid FILE PID
#   is_ours FILE NAME [ARG...]     # 0: ours; else why_not says why
#   proc_is PID START NAME [ARG...]
#   proc_start PID                 # prints the start time; fails if gone
#   find_proc NAME [ARG...]        # prints the pids running exactly that
#   forget_pid FILE                # removes FILE and FILE.start
#
# NAME is matched against the base name of argv[0] (so a daemon started
# from another bin/ directory, or whose binary `make build` has since
# replaced, is still recognised); the ARGs must be exactly the rest of
# its argv. "*" as NAME matches any program. proc_is -p ... (prefix)
# lets argv continue after the ARGs.

# proc_start prints PID's start time; it fails when PID does not run
# (no such process, or a zombie).
proc_start() {
	_ps_stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# The command name (field 2) may hold spaces and ')': count fields
	# from the last ')'. What follows is field 3 (state) onwards.
	_ps_rest=${_ps_stat##*) }
	# Numbers and one state letter: nothing for the shell to glob.
	# shellcheck disable=SC2086
	set -- $_ps_rest
	case $1 in Z | X | x) return 1 ;; esac
	[ $# -ge 20 ] || return 1
	shift 19
	printf '%s\n' "$1"
}

# proc_argv_is [-p] PID NAME [ARG...]: PID's command line is NAME ARG...
proc_argv_is() {
	_pa_prefix=
	if [ "$1" = -p ]; then
		_pa_prefix=1
		shift
	fi
	_pa_pid=$1 _pa_name=$2
	shift 2
	# One argument a line; the daemons' arguments hold no newlines.
	_pa_argv=$(tr '\0' '\n' <"/proc/$_pa_pid/cmdline" 2>/dev/null) || return 1
	[ -n "$_pa_argv" ] || return 1
	_pa_arg0=${_pa_argv%%
*}
	case $_pa_argv in
	*"
"*) _pa_rest=${_pa_argv#*
} ;;
	*) _pa_rest= ;;
	esac
	if [ "$_pa_name" != "*" ] && [ "${_pa_arg0##*/}" != "$_pa_name" ]; then
		return 1
	fi
	_pa_want=
	[ $# -gt 0 ] && _pa_want=$(printf '%s\n' "$@")
	if [ -n "$_pa_prefix" ]; then
		[ -z "$_pa_want" ] && return 0
		case $_pa_rest in
		"$_pa_want" | "$_pa_want
"*) return 0 ;;
		esac
		return 1
	fi
	[ "$_pa_rest" = "$_pa_want" ]
}

# proc_is [-p] PID START NAME [ARG...]: PID runs, started at START (as
# proc_start prints it), with command line NAME ARG....
proc_is() {
	_pi_p=
	if [ "$1" = -p ]; then
		_pi_p=-p
		shift
	fi
	_pi_pid=$1 _pi_start=$2
	shift 2
	case $_pi_pid in '' | *[!0-9]*) return 1 ;; esac
	[ "$(proc_start "$_pi_pid")" = "$_pi_start" ] || return 1
	# shellcheck disable=SC2086
	proc_argv_is $_pi_p "$_pi_pid" "$@"
}

# record_pid FILE PID names PID, a process just started, in FILE.
record_pid() {
	_rp_start=$(proc_start "$2") || {
		echo "pidfile: pid $2 exited before it could be recorded in $1" >&2
		printf '%s\n' "$2" >"$1"
		rm -f "$1.start"
		return 1
	}
	# The start time first: a crash between the two writes leaves a
	# pid file that names no process (is_ours says no), never one that
	# names the wrong process.
	printf '%s\n' "$_rp_start" >"$1.start"
	printf '%s\n' "$2" >"$1"
}

# pidfile_pid FILE prints the pid FILE records (nothing if none).
pidfile_pid() {
	_pp=$(head -n 1 "$1" 2>/dev/null) || return 0
	case $_pp in '' | *[!0-9]*) return 0 ;; esac
	printf '%s\n' "$_pp"
}

# is_ours FILE NAME [ARG...] succeeds when FILE names a running process
# that is the one record_pid recorded (same start time) and runs NAME
# ARG.... Otherwise why_not holds the reason, for a message.
is_ours() {
	_io_pf=$1
	shift
	why_not=
	if [ ! -f "$_io_pf" ]; then
		why_not="no pid file"
		return 1
	fi
	_io_pid=$(pidfile_pid "$_io_pf")
	if [ -z "$_io_pid" ]; then
		why_not="no pid in $_io_pf"
		return 1
	fi
	_io_start=$(head -n 1 "$_io_pf.start" 2>/dev/null) || _io_start=
	if [ -z "$_io_start" ]; then
		why_not="no start time recorded for pid $_io_pid ($_io_pf.start)"
		return 1
	fi
	_io_now=$(proc_start "$_io_pid") || {
		why_not="pid $_io_pid is not running"
		return 1
	}
	if [ "$_io_now" != "$_io_start" ]; then
		why_not="pid $_io_pid is another process now (started at tick $_io_now, recorded $_io_start)"
		return 1
	fi
	if ! proc_argv_is "$_io_pid" "$@"; then
		why_not="pid $_io_pid runs '$(tr '\0' ' ' <"/proc/$_io_pid/cmdline" 2>/dev/null | sed 's/ $//')', not '$*'"
		return 1
	fi
	return 0
}

# find_proc NAME [ARG...] prints the pids of running processes whose
# command line is exactly NAME ARG... (whatever pid file says what).
find_proc() {
	# One grep over every command line for the last argument (a config
	# path, in practice), then the exact check on the few it finds.
	eval "_fp_last=\${$#}"
	for _fp_f in $(grep -l -a -F -e "$_fp_last" /proc/[0-9]*/cmdline 2>/dev/null); do
		_fp_pid=${_fp_f#/proc/}
		_fp_pid=${_fp_pid%/cmdline}
		[ "$_fp_pid" = "$$" ] && continue
		proc_start "$_fp_pid" >/dev/null || continue
		proc_argv_is "$_fp_pid" "$@" && printf '%s\n' "$_fp_pid"
	done
	return 0
}

# forget_pid FILE removes a pid file and its start time.
forget_pid() {
	rm -f "$1" "$1.start"
}
