#!/bin/bash -p
# Installs the system packages tend needs, through the machine's package manager (apt-get, or dnf
# on Fedora), with `sudo -n` when not root. Where it cannot install (no root and no sudo that runs
# without a password, no known package manager, a failed install) it prints the one command to
# run and exits 1. With everything there it only looks (`command -v`) and exits 0 without a word.
#
#   bin/system-setup.sh           what tend needs to run        (npm run setup, tend setup)
#   bin/system-setup.sh --tests   that, and what its tests need (npm test, .ci/run)
#   --json                        one JSON document on stdout: {set, manager, installed, missing, command}
#
# Messages go to stderr: one line naming what was installed; on a failure the package manager's
# whole output, then the command to run.
set -uo pipefail

# First, PATH: only its folders that no one but root or this user can change. npm puts
# node_modules/.bin of the project and of every folder above it first on PATH, and this script runs
# as root (npm test's pretest, tend setup, .ci/run): a folder another user can write would choose
# what root runs. The rule is protocol/program-folders.ts's: an absolute folder that it and every
# folder above it (the real ones) are root's or this uid's and writable by no one else, but for a
# sticky folder (/tmp) above one of theirs. stat is named by its path, $EUID is bash's own: nothing
# is looked up on PATH before it is safe (and bash is /bin/bash, the first line).
# Prints the real folder (symlinks resolved) when it is safe: that is what goes on PATH, never the
# entry's path through a link, which the link's owner could re-point while the script runs.
safe_folder() { # FOLDER
  local real folder info mode is_entry=1
  case $1 in /*) ;; *) return 1 ;; esac
  real=$(cd -P -- "$1" 2>/dev/null && pwd -P) || return 1
  folder=$real
  while :; do
    info=$("$stat_tool" -c '%u %a' -- "$folder" 2>/dev/null) || return 1
    [ "${info% *}" = 0 ] || [ "${info% *}" = "$EUID" ] || return 1
    mode=$((8#${info#* }))
    if ((mode & 8#022)) && ! ((is_entry == 0 && mode & 8#1000)); then return 1; fi
    [ "$folder" = / ] && break
    folder=${folder%/*}
    folder=${folder:-/}
    is_entry=0
  done
  echo "$real"
}
safe_path() { # PATH
  local kept='' entry entries real
  IFS=: read -r -a entries <<<"$1"
  for entry in "${entries[@]}"; do
    if [ -n "$stat_tool" ] && real=$(safe_folder "$entry"); then
      case ":$kept:" in *":$real:"*) ;; *) kept+="${kept:+:}$real" ;; esac
    fi
  done
  echo "$kept"
}
stat_tool=''
for stat_tool in /usr/bin/stat /bin/stat ''; do [ -z "$stat_tool" ] || [ -x "$stat_tool" ] && break; done
PATH=$(safe_path "${PATH:-}")
[ -n "$PATH" ] || PATH=$(safe_path /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
[ -n "$PATH" ] || PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

usage='usage: system-setup.sh [--tests] [--json]'
tests=0
json=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    --json) json=1 ;;
    -h | --help)
      echo "$usage"
      exit 0
      ;;
    *)
      echo "system-setup.sh: unknown option: $arg ($usage)" >&2
      exit 2
      ;;
  esac
done
case $0 in */*) here=${0%/*} ;; *) here=. ;; esac

has() { command -v "$1" >/dev/null 2>&1; }

# The packages missing now, as a Debian name and a Fedora name for each (two lists in step).
apt_missing=()
dnf_missing=()
want() { # DEBIAN-NAMES FEDORA-NAMES (space-separated)
  apt_missing+=($1)
  dnf_missing+=($2)
}
find_missing() {
  apt_missing=()
  dnf_missing=()
  # The default sandbox, workspace: without bubblewrap it is refused, and only --sandbox off runs.
  has bwrap || want bubblewrap bubblewrap
  # A C compiler only where tend's C is not built yet (a checkout before `npm ci`, or a package
  # without a prebuilt spawner): the build (daemon/native/build.mjs) compiles the spawner and the
  # addon with it. A package that has them needs none; without them tasks still run, through
  # child_process, but slower and without --stdin and --tty. The tests build the C themselves.
  if ! has cc && { [ "$tests" = 1 ] || [ ! -x "$here/../dist/native/tend-spawner" ]; }; then
    want 'gcc libc6-dev' 'gcc glibc-devel'
  fi
  [ "$tests" = 1 ] || return 0
  # setpriv: tests start daemons as the non-root user tend-test (made below, in test_machine).
  has setpriv || want util-linux util-linux
  has useradd || want passwd shadow-utils
  # The console's browser tests drive chromium headless; its TLS tests make a certificate with openssl.
  has chromium || want chromium chromium
  has openssl || want openssl openssl
  # The cluster's tests start a real Redis on a loopback port.
  has redis-server || want redis-server redis
  # The everyday-work tests run a parallel make build, python3 -m venv and git in tasks.
  has make || want make make
  has git || want git git
  { has python3 && python3 -c 'import ensurepip' >/dev/null 2>&1; } || want python3-venv python3
  # The escape suite tries to trace the daemon with strace from inside a sandbox (absent, the try could not fail).
  has strace || want strace strace
  # The network tests fetch through the egress proxy (curl) and look at a task's namespace (ip).
  has curl || want curl curl
  has ip || want iproute2 iproute
  # The service unit's test checks what `tend service install` writes with systemd-analyze verify (nothing is started).
  has systemd-analyze || want systemd systemd
}

if has apt-get; then
  manager=apt-get
elif has dnf; then
  manager=dnf
else
  manager=none
fi
root=0
[ "$(id -u)" = 0 ] && root=1

packages() { if [ "$manager" = dnf ]; then echo "${dnf_missing[*]}"; else echo "${apt_missing[*]}"; fi; }

# The one command that installs what is missing, as this user would type it.
install_command() {
  local line="$manager install -y $(packages)"
  if [ "$root" = 1 ]; then
    echo "$line"
  elif has sudo; then
    echo "sudo $line"
  else
    echo "su -c '$line'"
  fi
}

json_list() { # WORDS...
  local out='' word
  for word in "$@"; do out+="${out:+,}\"$word\""; done
  echo "[$out]"
}

# finish EXIT-CODE INSTALLED-WORDS COMMAND
finish() {
  if [ "$json" = 1 ]; then
    local set=runtime command=null manager_json=null
    [ "$tests" = 1 ] && set=tests
    [ -n "$3" ] && command="\"$3\""
    [ "$manager" != none ] && manager_json="\"$manager\""
    # shellcheck disable=SC2046 # word lists of package names, split on purpose
    echo "{\"set\":\"$set\",\"manager\":$manager_json,\"installed\":$(json_list $2),\"missing\":$(json_list $(packages)),\"command\":$command}"
  fi
  exit "$1"
}

# The tests' machine beyond packages: the non-root user tests run daemons as, and its task cgroup
# folders. Made when missing (as root, or through `sudo -n`); else the commands to run, and exit 1.
# Where the v1 controllers are mounted (its own tests point it at a fake tree).
cgroup_base=${TEND_SETUP_CGROUP_BASE:-/sys/fs/cgroup}
test_machine() {
  [ "$tests" = 1 ] || return 0
  local steps=() controller top group
  # The dedicated non-root user (test/helpers/test-daemon.ts, startTestDaemon({ user: 'unprivileged' })):
  # no home, no login, its own group (or the group of that name where one is left).
  if ! id -u tend-test >/dev/null 2>&1; then
    if getent group tend-test >/dev/null 2>&1; then group='--gid tend-test'; else group='--user-group'; fi
    steps+=("useradd --system $group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin tend-test")
  fi
  # Task cgroups: tend/<uid> per daemon uid, tend itself root's (0755) so that no other uid can replace
  # a daemon's groups; the test user gets its own folder, so strict and workspace's bounds run as
  # non-root too. tend is made root's even where an earlier set-up gave it to the test user.
  for controller in memory pids; do
    [ -e "$cgroup_base/$controller/cgroup.procs" ] || continue
    top="$cgroup_base/$controller/tend"
    if [ "${#steps[@]}" != 0 ] || [ "$(stat -c %u:%a "$top" 2>/dev/null)" != 0:755 ] \
      || [ "$(stat -c %U:%a "$top/$(id -u tend-test)" 2>/dev/null)" != tend-test:755 ]; then
      steps+=("sh -c 'mkdir -p $top/\$(id -u tend-test) && chown root:root $top && chmod 0755 $top && chown tend-test:tend-test $top/\$(id -u tend-test) && chmod 0755 $top/\$(id -u tend-test)'")
    fi
  done
  [ "${#steps[@]}" = 0 ] && return 0
  local prefix=''
  if [ "$root" = 0 ]; then
    if has sudo && sudo -n true >/dev/null 2>&1; then
      prefix='sudo -n '
    else
      echo "tend setup: the tests need the user tend-test and its cgroup folders; this user is not root and has no sudo that runs without a password. Run as root:" >&2
      printf '%s\n' "${steps[@]}" >&2
      return 1
    fi
  fi
  local step
  for step in "${steps[@]}"; do
    eval "$prefix$step" >&2 || { echo "tend setup: failed: $prefix$step" >&2; return 1; }
  done
  echo "tend setup: made the test user tend-test and its cgroup folders" >&2
}

find_missing
if [ "${#apt_missing[@]}" = 0 ]; then
  test_machine || finish 1 '' ''
  finish 0 '' ''
fi
wanted=$(packages)

if [ "$manager" = none ]; then
  echo "tend setup: missing $wanted, and there is no apt-get or dnf here to install them: install $wanted (Debian's names) with this system's package manager" >&2
  finish 1 '' ''
fi

as_root=()
if [ "$root" = 0 ]; then
  if has sudo && sudo -n true >/dev/null 2>&1; then
    as_root=(sudo -n)
  else
    echo "tend setup: missing $wanted; this user is not root and has no sudo that runs without a password. Run:" >&2
    install_command >&2
    finish 1 '' "$(install_command)"
  fi
fi

log=$(mktemp "${TMPDIR:-/tmp}/tend-setup-XXXXXX.log")
trap 'rm -f "$log"' EXIT
install_packages() { # PACKAGES...
  if [ "$manager" = dnf ]; then
    "${as_root[@]}" dnf install -y -q "$@" >>"$log" 2>&1
  else
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@")
    # The package lists may be missing (a fresh container) or stale: fetched only when needed.
    "${as_root[@]}" "${apt[@]}" >>"$log" 2>&1 \
      || { "${as_root[@]}" apt-get update -qq >>"$log" 2>&1 && "${as_root[@]}" "${apt[@]}" >>"$log" 2>&1; }
  fi
}
read -r -a wanted_list <<<"$wanted"
install_packages "${wanted_list[@]}"
find_missing
# Newer Debian releases ship setpriv in a package of its own.
if [ "$manager" = apt-get ] && [ "$tests" = 1 ] && ! has setpriv; then
  install_packages setpriv && wanted+=' setpriv'
  find_missing
fi
if [ "${#apt_missing[@]}" != 0 ]; then
  cat "$log" >&2
  echo "tend setup: could not install $(packages) with $manager (its output is above). Run:" >&2
  install_command >&2
  finish 1 '' "$(install_command)"
fi
echo "tend setup: installed $wanted ($manager)" >&2
test_machine || finish 1 "$wanted" ''
finish 0 "$wanted" ''
