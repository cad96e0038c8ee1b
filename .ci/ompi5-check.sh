#!/bin/bash
# .ci/ompi5-check.sh - build coll/gpu against Open MPI 5.0 and run `make check` there.
#
# Debian 12 ships Open MPI 4.1; Debian 13 (trixie) ships 5.0.x, which needs trixie's C library
# and cannot be installed beside 4.1.  So this script makes a Debian 13 root file system with
# debootstrap (from the same Debian mirror apt uses), installs Open MPI 5.0 with its
# development headers there, copies this source tree in, and builds and checks it inside the
# chroot on the emulated device (no CUDA), with Debian 13's python3-torch for the torch
# backend's tests (tests/torch).  Run it as root on Debian or Ubuntu:
#
#   sudo .ci/ompi5-check.sh            # makes (or reuses) /var/tmp/coll-gpu-ompi5/root
#
# Environment: OMPI5_ROOT (the root file system, default /var/tmp/coll-gpu-ompi5/root; kept
# between runs by hand, made fresh in CI), OMPI5_MIRROR (Debian mirror, default: the one in
# apt's sources, else deb.debian.org), OMPI5_SUITE (default trixie), JOBS (make -j, default:
# all cores), OMPI5_TESTS (a TESTS= list for `make check`, default: the whole suite).
# Ends with "N passed, M failed" and the exit status of `make check`.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
root=${OMPI5_ROOT:-/var/tmp/coll-gpu-ompi5/root}
suite=${OMPI5_SUITE:-trixie}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)

say() { printf '\n== [ompi5 %ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }
die() { printf 'ompi5-check: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot)"

# The mirror: the one apt already uses here, so that CI machines with a local mirror use it.
mirror=${OMPI5_MIRROR:-}
if [ -z "$mirror" ]; then
    mirror=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
                 /etc/apt/sources.list.d/ 2>/dev/null | grep -oE 'https?://[^ ]+' | head -1 || true)
    : "${mirror:=http://deb.debian.org/debian}"
fi

packages=build-essential,autoconf,automake,libtool,pkg-config,openmpi-bin,libopenmpi-dev
packages=$packages,libpmix-dev,libhwloc-dev,libucx-dev,ca-certificates

# ---- the Debian 13 root file system --------------------------------------------------------
mounted=()
cleanup() {
    local i
    for (( i=${#mounted[@]}-1; i>=0; i-- )); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
}
trap cleanup EXIT

if [ ! -x "$root/usr/bin/mpicc" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    fi
    keyring=()
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] \
        && keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    say "debootstrap $suite from $mirror into $root"
    rm -rf "$root"
    mkdir -p "$root"
    debootstrap --variant=minbase "${keyring[@]}" --include="$packages" \
        "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
        || { tail -30 "$root.debootstrap.log"; [ -f "$root/debootstrap/debootstrap.log" ] \
                 && tail -30 "$root/debootstrap/debootstrap.log"; die "debootstrap failed"; }
fi

# What the build and mpirun need from the kernel: processes, devices, POSIX shared memory
# (Open MPI's shared-memory transport), and /sys for hwloc's topology.
for m in proc sys dev dev/shm; do
    mkdir -p "$root/$m"
    if ! mountpoint -q "$root/$m"; then
        case $m in
            proc) mount -t proc proc "$root/proc" ;;
            sys) mount -t sysfs sysfs "$root/sys" ;;
            dev) mount --bind /dev "$root/dev" ;;
            dev/shm) mount -t tmpfs -o mode=1777 shm "$root/dev/shm" ;;
        esac
        mounted+=("$root/$m")
    fi
done

ompi_version=$(chroot "$root" ompi_info --version 2>/dev/null | head -1 || true)
say "in the chroot: $ompi_version"

# The torch backend's tests (tests/torch): Debian 13's CPU-only torch, and pip to install the
# backend the way its users do; mpi4py for tests/mpi/mpi4py_device.sh; valgrind for
# tests/mpi/hostpath_instr.sh.  A root made before they were needed gets them here.
if ! chroot "$root" python3 -c 'import torch.distributed, mpi4py' >/dev/null 2>&1 \
        || ! chroot "$root" python3 -m pip --version >/dev/null 2>&1 \
        || ! chroot "$root" /bin/sh -c 'command -v valgrind' >/dev/null 2>&1; then
    say "installing python3-torch, python3-mpi4py, pip and valgrind in the chroot"
    chroot "$root" /bin/bash -euo pipefail -c '
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends python3-torch python3-mpi4py \
            python3-pip python3-setuptools valgrind >/dev/null' \
        || die "could not install python3-torch, python3-mpi4py and valgrind in the chroot"
fi

# Debian 13's libopenmpi-dev lacks opal/mca/threads/pthreads/*.h, which its other headers
# include: take them from Debian's source package of the same version (configure's
# --with-ompi-src; the installed headers still come first).
ompi_src=/usr/src/openmpi-src
if [ ! -f "$root$ompi_src/VERSION" ]; then
    say "fetching the source package of the installed Open MPI (for the missing headers)"
    echo "deb-src $mirror $suite main" >"$root/etc/apt/sources.list.d/coll-gpu-src.list"
    chroot "$root" /bin/bash -euo pipefail -c '
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        v=$(dpkg-query -W -f="\${Version}" libopenmpi-dev)
        rm -rf /usr/src/openmpi-get && mkdir -p /usr/src/openmpi-get && cd /usr/src/openmpi-get
        apt-get source -qq "openmpi=$v" >/dev/null
        d=$(find . -maxdepth 1 -type d -name "openmpi-*" | head -1)
        rm -rf '"$ompi_src"' && mv "$d" '"$ompi_src"'
        cd / && rm -rf /usr/src/openmpi-get' \
        || die "could not fetch the source package of openmpi"
fi

# ---- the source: a copy of the working tree, without build products ------------------------
src=/coll-gpu
say "copying the source tree into $root$src"
rm -rf "${root:?}$src"
mkdir -p "$root$src"
if git -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
    # tracked and untracked-but-not-ignored files: what the working tree would commit
    (cd "$here" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar --null -T - -cf -) \
        | tar -C "$root$src" -xf -
else
    (cd "$here" && tar --exclude='./_build*' --exclude='./_install' --exclude='./.git' -cf - .) \
        | tar -C "$root$src" -xf -
fi

# ---- build and check inside -------------------------------------------------------------
say "autogen, configure (no CUDA), make -j$jobs"
rc=0
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    JOBS="$jobs" OMPI5_TESTS="${OMPI5_TESTS:-}" /bin/bash -euo pipefail -c '
    cd /coll-gpu
    ./autogen.sh >autogen.out 2>&1 || { cat autogen.out; exit 1; }
    mkdir -p _build && cd _build
    ../configure --enable-werror --without-cuda --with-ompi-src='"$ompi_src"' \
        >configure.out 2>&1 \
        || { tail -40 configure.out; exit 1; }
    sed -n "/^coll\/gpu /,\$p" configure.out
    make -j"$JOBS" >make.out 2>&1 || { tail -60 make.out; exit 1; }
    ' || die "the build against $ompi_version failed"

say "make check against $ompi_version"
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    JOBS="$jobs" OMPI5_TESTS="${OMPI5_TESTS:-}" /bin/bash -uo pipefail -c '
    cd /coll-gpu/_build
    rc=0
    if [ -n "$OMPI5_TESTS" ]; then
        make -j"$JOBS" check TESTS="$OMPI5_TESTS" || rc=$?
    else
        make -j"$JOBS" check || rc=$?
    fi
    [ -f tests/test-suite.log ] && [ $rc -ne 0 ] \
        && sed -n "/^FAIL\|^ERROR/,+40p" tests/test-suite.log | head -200
    ../tests/summary.sh tests/test-suite.log
    exit $rc
    ' || rc=$?
say "done ($ompi_version): make check exit status $rc"
exit $rc
