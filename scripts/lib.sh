# Shared helpers for faultline shell scripts (sourced, not run).
# shellcheck shell=bash

FL_TOP=${FL_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
FL_CACHE=${FAULTLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/faultline}
FL_VERSIONS=$FL_CACHE/versions.env

# On a terminal a message clears a build's progress line first (fl_build
# redraws it below).
info() { [ -t 2 ] && printf '\r\033[K' >&2; printf 'faultline: %s\n' "$*" >&2; }
die() { printf 'faultline: error: %s\n' "$*" >&2; exit "${FL_DIE_STATUS:-2}"; }

# Re-exec under sudo when not root (apt and /etc need it).
need_root() {
    [ "$(id -u)" -eq 0 ] && return 0
    command -v sudo >/dev/null || die "must run as root (and sudo is not installed)"
    exec sudo -E "$0" "$@"
}

# Run "$@" (a long build step: ninja, make) so that a TERM, INT or HUP sent
# to this script stops it too.  bash runs a trap only once its foreground
# child has exited, and a stopped launcher signals the script alone, so a
# plain `ninja` would build on with nobody waiting.  The child gets TERM
# (a background child ignores INT), this script waits for it and exits
# 128 + the signal's number.  Returns the child's status otherwise.
fl_forward() {
    local pid rc=0 sig=
    "$@" &
    pid=$!
    trap 'sig=15; kill -TERM "$pid" 2>/dev/null' TERM
    trap 'sig=2; kill -TERM "$pid" 2>/dev/null' INT
    trap 'sig=1; kill -TERM "$pid" 2>/dev/null' HUP
    wait "$pid" || rc=$?
    # A trapped signal ends `wait` early: wait again for the child itself.
    while kill -0 "$pid" 2>/dev/null; do
        wait "$pid" || rc=$?
    done
    trap - TERM INT HUP
    [ -z "$sig" ] || exit $((128 + sig))
    return "$rc"
}

# Run "$@" as fl_forward does, its output (stdout and stderr) into the file
# $2, with a progress line for it on stderr, labelled $1 (faultline.host.step_progress
# follows the file: ninja's [N/M], kbuild's CC/LD lines or the elapsed time;
# on a terminal one line updated in place, in a log one line every 30 s at
# most, then a last one).  No pipe: the step is fl_forward's own child, and
# the follower (a background child, its parent-death signal set) only reads
# the file; it ends when $2.done appears (no signal: it may still be
# starting), or with this script.  --no-forward (apt-get install: a dpkg
# stopped halfway leaves the system to repair): the step runs in the
# foreground as a plain command would, a stop of the script leaves it be.
fl_build() {
    local forward=fl_forward
    [ "$1" != --no-forward ] || { forward=; shift; }
    local label=$1 log=$2 rc=0 follower me=$BASHPID
    shift 2
    : >"$log"
    rm -f "$log.done"
    PYTHONPATH="$FL_TOP/python" python3 -m faultline.host.step_progress \
        --parent "$me" --start "${EPOCHREALTIME/,/.}" --done "$log.done" \
        "$label" "$log" </dev/null >/dev/null &
    follower=$!
    $forward "$@" >"$log" 2>&1 || rc=$?
    : >"$log.done"
    wait "$follower" 2>/dev/null || true
    rm -f "$log.done"
    return "$rc"
}

load_versions() {
    [ -f "$FL_VERSIONS" ] || die "no $FL_VERSIONS: run scripts/setup first"
    # shellcheck disable=SC1090
    . "$FL_VERSIONS"
}

# The QEMU source version only (setup --only qemu records it before the
# rest of the machine is set up, so the QEMU build can start early).
load_qemu_version() {
    local f=$FL_CACHE/src/download/VERSION
    [ -f "$f" ] || die "no QEMU source in $FL_CACHE/src/download: run scripts/setup first"
    read -r QEMU_SRC_VERSION QEMU_SRC_SUITE <"$f"
}
