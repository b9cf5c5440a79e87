#!/usr/bin/env bash
# login.sh USER [COMMAND [ARG...]] — on the login node of the netns
# cluster (TIDE_HOSTS=netns make up), open a shell as USER, or run
# COMMAND as USER, as if USER had logged in there: in the login node's
# network namespace, with USER's uid, gid and groups, a fresh
# environment (HOME, USER, SHELL, TERM), the Tide commands on PATH and
# TIDE_CONTROLLER set to the controller's api_addr, so that every
# command goes over TCP with a MUNGE credential from the login node's
# munged (TIDE_MUNGE_SOCKET). The controller's unix socket is out of
# reach there (it lies in a directory only root may enter, and
# TIDE_SOCKET is not set).
#
# COMMAND runs in the current directory when USER may enter it, else in
# USER's home, else in /. Its exit status is login.sh's. Run as root
# (entering a namespace needs it); TIDE_RUN as for make up. TIDE_HOST=login
# says where a shell is (and Debian's bash prompt shows "(tide-login)",
# through debian_chroot).
#
#   scripts/login.sh alice                 # a shell
#   scripts/login.sh nobody sbatch --wrap hostname
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/netns.sh
. "$ROOT/scripts/lib/netns.sh"
RUN=${TIDE_RUN:-$ROOT/run}

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  echo "usage: scripts/login.sh USER [COMMAND [ARG...]]  (a shell, or COMMAND, as USER on the netns cluster's login node)" >&2
  exit 2
fi
user=$1
shift
[ -d "$RUN" ] && RUN=$(cd "$RUN" && pwd)
if ! netns_load "$RUN"; then
  echo "login: no netns cluster under $RUN (start one: TIDE_HOSTS=netns make up; TIDE_RUN names another)" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "login: must run as root (it enters the login node's network namespace, then becomes $user)" >&2
  exit 1
fi
if ! pw=$(getent passwd "$user"); then
  echo "login: no user $user (getent passwd $user)" >&2
  exit 1
fi
IFS=: read -r _ _ uid gid _ _ shell <<<"$pw"
ns=$(netns_ns login)
if [ ! -e "/run/netns/$ns" ]; then
  echo "login: the login node's namespace $ns is gone: make up again (TIDE_HOSTS=netns)" >&2
  exit 1
fi
# The user's shell, unless it refuses logins (nobody's, daemon's):
# then bash, for the shell opened here and the one salloc starts.
case $shell in '' | */nologin | */false) shell=/bin/bash ;; esac
[ $# -eq 0 ] && set -- "$shell" -i

# The cluster CA's certificate, when the cluster has one (TLS): the
# commands verify the controller with it.
ca=()
[ -f "$RUN/hosts/login/ca.crt" ] && ca=(TIDE_CA="$RUN/hosts/login/ca.crt")

# setpriv, not su or runuser: no PAM session (none is needed to run
# commands, and PAM modules differ between machines), and it execs, so
# that COMMAND keeps login.sh's terminal and process (srun --pty,
# salloc) and its exit status is ours.
exec nsenter --net="/run/netns/$ns" -- \
  setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- \
  env PATH="$NETNS_BIN:/usr/local/bin:/usr/bin:/bin" \
  TIDE_CONTROLLER="$NETNS_CTL_ADDR:$NETNS_API_PORT" \
  TIDE_MUNGE_SOCKET="$RUN/hosts/login/munge.socket" \
  "${ca[@]}" \
  SHELL="$shell" TIDE_HOST=login debian_chroot="tide-login" \
  sh -c 'cd "$0" 2>/dev/null || cd "$HOME" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@"
