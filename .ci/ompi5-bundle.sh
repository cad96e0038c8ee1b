#!/bin/bash
# .ci/ompi5-bundle.sh - Open MPI 5.0 with coll/gpu (cuda backend), its tests and its benchmark,
# as one relocated tree that runs from /tmp/o5 on any x86-64 Linux with a C library older or
# newer than Debian 13's: the GPU machine (Ubuntu 24.04, no network, no Open MPI 5.0) included.
#
#   sudo .ci/ompi5-bundle.sh           # writes .o5/ompi5-bundle.tar.xz and prints its size
#
# Open MPI 5.0.7 comes from a Debian 13 root file system (the one .ci/ompi5-check.sh makes; made
# here the same way when absent).  coll/gpu is built in it with the host's CUDA toolkit
# bind-mounted read-only at /usr/local/cuda (configure --with-cuda, UCX 1.18 and NCCL for the
# benchmark found as usual), together with every test program (make -C tests check TESTS=).
# Then the pieces a one-node run needs are copied out: mpirun, prterun/prte, prted, ompi_info,
# Open MPI's, PRRTE's and PMIx's libraries (Debian builds their components into them), PMIx's
# plugin, hwloc's PCI plugin, UCX's CMA module, the help files and configuration files, every
# shared library these need down to Debian 13's C library and loader, and coll/gpu's build
# (component, test programs, benchmark, topology tool) with its source's test scripts.
# patchelf gives every executable the bundled loader (/tmp/o5/glibc/ld-linux-x86-64.so.2) and
# every ELF an RPATH into the bundle, so nothing of the host's C library is used; only what a
# GPU machine brings itself is taken from its standard places, at the end of that path:
# libcuda.so.1 and libnvidia-ml.so.1 (the driver) and libnccl.so.2 (the benchmark's NCCL).
# DT_RPATH, not DT_RUNPATH: it is searched before LD_LIBRARY_PATH and serves dlopen too, so a
# host's LD_LIBRARY_PATH cannot swap a bundled library for one of its own.
#
# The tree: /tmp/o5/{bin,lib,glibc,share,etc}, /tmp/o5/env.sh (source it: PATH and the install
# directories of Open MPI, PRRTE and PMIx, which the three read from OPAL_*, PRTE_* and PMIX_*),
# /tmp/o5/MANIFEST.txt (versions), /tmp/o5/coll-gpu (source) and /tmp/o5/coll-gpu/_build (the
# build, at the path it was built at, so the test scripts find it as in a build tree).
# tests/gpu/ompi5-device-run.sh unpacks and runs it on the GPU machine.
#
# Environment: OMPI5_BUNDLE_ROOT (the Debian 13 root, default /var/tmp/coll-gpu-ompi5b/root; it
# is modified: coll/gpu is built in it and patchelf installed), CUDA_HOME (the toolkit to mount,
# default /usr/local/cuda), OMPI5_BUNDLE (the output, default .o5/ompi5-bundle.tar.xz),
# JOBS (make -j, default 2), OMPI5_BUNDLE_VERIFY (default 1: unpack the result into /tmp/o5
# here and check it: every ELF's libraries resolve inside it, ompi_info lists coll gpu, and a
# 2-rank test_smoke passes on the emulated device).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
root=${OMPI5_BUNDLE_ROOT:-/var/tmp/coll-gpu-ompi5b/root}
cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
out=${OMPI5_BUNDLE:-$here/.o5/ompi5-bundle.tar.xz}
jobs=${JOBS:-2}
prefix=/tmp/o5 # baked into every interpreter and RPATH: the bundle runs from here only
stage=/var/tmp/o5-stage # inside the root
start=$(date +%s)

say() { printf '\n== [ompi5-bundle %ds] %s\n' "$(($(date +%s) - start))" "$*"; }
die() { printf 'ompi5-bundle: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot and mounts)"
[ -x "$cuda/bin/nvcc" ] || die "no CUDA toolkit at $cuda (CUDA_HOME)"
command -v xz >/dev/null || die "xz is needed"

if [ ! -x "$root/usr/bin/mpicc" ] || [ ! -f "$root/usr/src/openmpi-src/VERSION" ]; then
    say "no Debian 13 root with Open MPI 5.0 at $root: making one with .ci/ompi5-check.sh"
    OMPI5_ROOT=$root OMPI5_TESTS=unit/test_dev_emulated JOBS=$jobs "$here/.ci/ompi5-check.sh" \
        || die "could not make the Debian 13 root"
fi

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
}
trap cleanup EXIT
for m in proc sys dev dev/shm usr/local/cuda; do
    mkdir -p "$root/$m"
    mountpoint -q "$root/$m" && continue
    case $m in
        proc) mount -t proc proc "$root/proc" ;;
        sys) mount -t sysfs sysfs "$root/sys" ;;
        dev) mount --bind /dev "$root/dev" ;;
        dev/shm) mount -t tmpfs -o mode=1777 shm "$root/dev/shm" ;;
        usr/local/cuda)
            mount --bind "$cuda" "$root/usr/local/cuda"
            mounted+=("$root/$m")
            mount -o remount,bind,ro "$root/usr/local/cuda"
            continue ;;
    esac
    mounted+=("$root/$m")
done

say "copying the source tree into $root$prefix/coll-gpu"
rm -rf "${root:?}$prefix" "${root:?}$stage"
mkdir -p "$root$prefix/coll-gpu"
(cd "$here" && git ls-files -z --cached --others --exclude-standard \
    | grep -zv '^tests/bench/results/' \
    | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar --null -T - -cf -) \
    | tar -C "$root$prefix/coll-gpu" -xf -
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$here" diff --quiet HEAD -- 2>/dev/null || commit="$commit+changes"

# Everything below runs inside the Debian 13 root.
cat >"$root/tmp/o5-bundle-inside.sh" <<'INSIDE'
set -euo pipefail
P=$1 S=$2 JOBS=$3 COMMIT=$4
export DEBIAN_FRONTEND=noninteractive
command -v patchelf >/dev/null || { apt-get update -qq && apt-get install -y -qq patchelf >/dev/null; }

echo "== build coll/gpu --with-cuda against $(ompi_info --version | head -1)"
cd "$P/coll-gpu"
./autogen.sh >autogen.out 2>&1 || { cat autogen.out; exit 1; }
mkdir -p _build && cd _build
../configure --enable-werror --with-cuda=/usr/local/cuda --with-ompi-src=/usr/src/openmpi-src \
    >configure.out 2>&1 || { tail -40 configure.out; exit 1; }
sed -n '/^coll\/gpu /,$p' configure.out
grep -q '^#define COLL_GPU_HAVE_CUDA 1' coll_gpu_config.h || { echo "no cuda backend"; exit 1; }
make -j"$JOBS" >make.out 2>&1 || { tail -60 make.out; exit 1; }
make -C tests -j"$JOBS" check TESTS= >check-build.out 2>&1 || { tail -60 check-build.out; exit 1; }
B=$P/coll-gpu/_build

echo "== staging $S"
rm -rf "$S"
mkdir -p "$S"/{bin,glibc,lib/openmpi,lib/prte,lib/pmix,lib/hwloc,lib/ucx,share,etc}
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
L=/usr/lib/$ma

# Open MPI's, PRRTE's and PMIx's programs (mpirun execs prterun; prterun launches the ranks
# itself on one node, and prted serves where it starts daemons)
cp -L /usr/bin/mpirun.openmpi "$S/bin/mpirun"
ln -s mpirun "$S/bin/mpiexec"
for p in ompi_info prte prted prun prte_info; do cp -L "/usr/bin/$p" "$S/bin/$p"; done
cp -L /usr/bin/pterm.openmpi "$S/bin/pterm"
ln -s prte "$S/bin/prterun" # one program; argv[0] chooses prterun's behaviour

# plugins loaded at run time (their directories are set in env.sh)
cp -L "$L"/pmix2/lib/pmix/*.so "$S/lib/pmix/"
cp -L "$L/hwloc/hwloc_pci.so" "$S/lib/hwloc/"
cp -L "$L/ucx/libuct_cma.so.0" "$S/lib/ucx/"

# help texts and configuration; PMIx's configuration names its plugin folder
cp -a /usr/share/openmpi "$S/share/openmpi"
cp -a /usr/share/prte "$S/share/prte"
cp -a "$L/pmix2/share/pmix" "$S/share/pmix"
rm -f "$S"/share/openmpi/*wrapper-data.txt
cp -L /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/prte-mca-params.conf \
    /etc/openmpi/prte.conf /etc/openmpi/prte-default-hostfile "$S/etc/"
sed "s|^mca_base_component_path *=.*|mca_base_component_path = $P/lib/pmix|" \
    "$L/pmix2/share/pmix-mca-params.conf" >"$S/etc/pmix-mca-params.conf"

# coll/gpu: the source (test scripts, fixtures) and the build's programs, at their build path;
# libtool's wrapper scripts are replaced by the programs they wrap
mkdir -p "$S/coll-gpu"
(cd "$P/coll-gpu" && tar --exclude=./_build --exclude=./autom4te.cache --exclude='*.out' -cf - .) \
    | tar -C "$S/coll-gpu" -xf -
SB=$S/coll-gpu/_build
mkdir -p "$SB/mca-coll-gpu/component" "$SB/kernels/.libs" "$SB/api/.libs" "$SB/topo"
cp coll_gpu_config.h "$SB/"
cp -L mca-coll-gpu/component/mca_coll_gpu.so "$SB/mca-coll-gpu/component/"
cp -L kernels/.libs/libcoll_gpu_dev.so.0 "$SB/kernels/.libs/"
cp -L api/.libs/libcollgpu.so.0 "$SB/api/.libs/" # the fp16/bf16 handles (component, tests)
cp -L topo/coll_gpu_topo "$SB/topo/"
for f in $(cd "$B" && find tests -type f -perm -u+x ! -path '*/.libs/*' ! -name '*.sh' ! -name '*.py'); do
    mkdir -p "$SB/$(dirname "$f")"
    real=$B/$(dirname "$f")/.libs/$(basename "$f")
    if [ -f "$real" ] && ! head -c4 "$B/$f" | grep -q ELF; then
        cp -L "$real" "$SB/$f"
    else
        cp -L "$B/$f" "$SB/$f"
    fi
done
find "$SB" -type f | while read -r f; do
    if head -c4 "$f" | grep -q ELF; then strip --strip-debug "$f"; fi
done

# every shared library the ELFs above need, down to the C library; the GPU machine's driver
# and NCCL stay outside
host_only='^(libcuda\.so\.1|libnvidia-ml\.so\.1|libnccl\.so\.2|linux-vdso\.so\.1)$'
elfs() {
    find "$S" -type f | while read -r f; do
        if head -c4 "$f" | grep -q ELF; then echo "$f"; fi
    done
}
copied=' '
while :; do
    new=0
    for f in $(elfs); do
        # ldd in the root: the bundled ELFs still carry Debian's interpreter and paths here
        while read -r name path; do
            [[ $name =~ $host_only ]] && continue
            case "$copied" in *" $name "*) continue ;; esac
            [ -n "$path" ] && [ -e "$path" ] || { echo "$f: $name not found"; exit 1; }
            case $path in "$P"/*) copied="$copied$name "; continue ;; esac
            pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | cut -d: -f1 | head -1)
            if [ "$pkg" = libc6 ]; then
                cp -L "$path" "$S/glibc/$name"
            else
                cp -L "$path" "$S/lib/$name"
            fi
            copied="$copied$name "
            new=1
        done < <(ldd "$f" 2>/dev/null | awk '
            /=> not found/ { print $1; next }
            /=>/ { print $1, $3; next }
            /^[ \t]*\/.*ld-linux/ { n = $1; sub(/.*\//, "", n); print n, $1 }')
    done
    [ $new -eq 0 ] && break
done

# the bundled loader and an RPATH into the bundle, host paths last for the driver and NCCL
rpath=$P/lib:$P/glibc:$P/coll-gpu/_build/kernels/.libs:$P/coll-gpu/_build/api/.libs
rpath=$rpath:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/lib/$ma:/lib/$ma
rpath=$rpath:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/lib64:/usr/lib
for f in $(elfs); do
    case $f in "$S"/glibc/*) continue ;; esac
    if patchelf --print-interpreter "$f" >/dev/null 2>&1; then
        patchelf --set-interpreter "$P/glibc/ld-linux-x86-64.so.2" "$f"
    fi
    patchelf --force-rpath --set-rpath "$rpath" "$f"
done

cat >"$S/env.sh" <<ENV
# Source this: Open MPI 5.0, PRRTE and PMIx from $P (not from their build-time places).
export PATH=$P/bin:\$PATH
for _v in OPAL PRTE PMIX; do
    _p=\$(echo \$_v | tr A-Z a-z); [ \$_p = opal ] && _p=openmpi
    export \${_v}_PREFIX=$P \${_v}_EXEC_PREFIX=$P \${_v}_BINDIR=$P/bin \${_v}_SBINDIR=$P/bin
    export \${_v}_LIBDIR=$P/lib \${_v}_LIBEXECDIR=$P/bin \${_v}_DATAROOTDIR=$P/share
    export \${_v}_DATADIR=$P/share \${_v}_SYSCONFDIR=$P/etc \${_v}_INCLUDEDIR=$P/include
    export \${_v}_PKGDATADIR=$P/share/\$_p \${_v}_PKGLIBDIR=$P/lib/\$_p
    export \${_v}_PKGINCLUDEDIR=$P/include/\$_p \${_v}_SHAREDSTATEDIR=$P/var
    export \${_v}_LOCALSTATEDIR=$P/var \${_v}_MANDIR=$P/share/man \${_v}_INFODIR=$P/share/info
done
unset _v _p
# prterun hands its ranks its environment without PMIX_* and PRTE_* (they are meant for it), so
# a rank's PMIx would fall back to its build-time folders (the host's PMIx plugins, where the
# host has a PMIx): Open MPI's env list forwards the PMIx folders to the ranks explicitly
_l=
for _d in PREFIX EXEC_PREFIX BINDIR SBINDIR LIBDIR LIBEXECDIR DATAROOTDIR DATADIR SYSCONFDIR \\
    INCLUDEDIR PKGDATADIR PKGLIBDIR PKGINCLUDEDIR SHAREDSTATEDIR LOCALSTATEDIR MANDIR INFODIR; do
    _l=\${_l:+\$_l;}PMIX_\$_d
done
export OMPI_MCA_mca_base_env_list=\$_l
unset _l _d
export OMPI_PRTERUN=$P/bin/prterun
export HWLOC_PLUGINS_PATH=$P/lib/hwloc UCX_MODULE_DIR=$P/lib/ucx
ENV

{
    echo "coll/gpu $COMMIT, bundle made $(date -u '+%Y-%m-%d %H:%M UTC') for $P"
    echo "Open MPI $(dpkg-query -W -f='${Version}' openmpi-bin), PMIx $(dpkg-query -W -f='${Version}' libpmix2t64)," \
        "hwloc $(dpkg-query -W -f='${Version}' libhwloc15), UCX $(dpkg-query -W -f='${Version}' libucx0)," \
        "libevent $(dpkg-query -W -f='${Version}' libevent-core-2.1-7t64)"
    echo "C library: Debian $(cat /etc/debian_version) libc6 $(dpkg-query -W -f='${Version}' libc6)," \
        "gcc $(gcc -dumpfullversion)"
    echo "CUDA toolkit used at build time: $(/usr/local/cuda/bin/nvcc --version | tail -2 | head -1)"
    echo "NCCL header at build time: $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' /usr/local/cuda/include/nccl.h | tr '\n' . | sed 's/\.$//')"
    echo "taken from the host at run time: libcuda.so.1, libnvidia-ml.so.1, libnccl.so.2"
    echo "RPATH: $rpath"
    sed -n '/^coll\/gpu /,$p' configure.out
} >"$S/MANIFEST.txt"
touch "$S/.coll-gpu-ompi5-bundle"
echo "staged: $(du -sh "$S" | cut -f1), $(elfs | wc -l) ELF files"
INSIDE

say "building and staging inside $root"
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    /bin/bash /tmp/o5-bundle-inside.sh "$prefix" "$stage" "$jobs" "$commit" \
    || die "building or staging inside the Debian 13 root failed"

say "compressing into $out"
mkdir -p "$(dirname "$out")"
tar -C "$root$stage" --owner=0 --group=0 --sort=name -cf - . | xz -T2 -9 >"$out.tmp"
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
printf 'bundle: %s (%d bytes, %.1f MiB)\n' "$out" "$size" "$(echo "$size / 1048576" | bc -l)"
[ "$size" -lt $((60 * 1024 * 1024)) ] || die "the bundle is over 60 MiB: too big to carry"

[ "${OMPI5_BUNDLE_VERIFY:-1}" = 1 ] || exit 0
# ---- the proof here: unpack where it runs and use it with this machine's C library ------------
say "verifying: unpacking into $prefix (this machine's C library: $(ldd --version | head -1))"
if [ -e "$prefix" ] && [ ! -e "$prefix/.coll-gpu-ompi5-bundle" ]; then
    die "$prefix exists and is not a bundle: not touching it"
fi
rm -rf "$prefix" && mkdir -p "$prefix" && tar -C "$prefix" -xJf "$out"
OUT=${OMPI5_BUNDLE_VERIFY_OUT:-$(dirname "$out")/verify} \
    "$here/tests/gpu/ompi5-device-run.sh" --emulated --no-unpack
