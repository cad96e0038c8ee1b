#!/bin/bash
# quickstart.sh - build coll/gpu on a fresh machine and use it.
#
#   ./quickstart.sh run    install missing packages (apt, when root), build, install into
#                          ./_install, run the benchmark: on the GPUs when there are any, else
#                          on the emulated device; prints its table
#   ./quickstart.sh test   the same set-up, then `make check`; ends with "N passed, M failed"
#
# Environment: JOBS (parallel make jobs, default: all cores), CONFIGURE_FLAGS (extra configure
# flags), NP (ranks for the demo).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
build=$here/_build
prefix=$here/_install
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf '\n== %s\n' "$*"; }
die() { printf 'quickstart: %s\n' "$*" >&2; exit 1; }

case "$cmd" in
    run|test) ;;
    *) echo "usage: $0 run|test" >&2; exit 2 ;;
esac

# ---- packages ----------------------------------------------------------------------------
# Debian/Ubuntu package names of what the build needs (CUDA comes from NVIDIA's toolkit in
# /usr/local/cuda when present; without it only the emulated backend is built).
packages=(openmpi-bin libopenmpi-dev libhwloc-dev libucx-dev autoconf automake libtool
          pkg-config make gcc g++)
# make check also runs mpi4py (tests/mpi/mpi4py_device.sh), as Python programs reach MPI, and
# counts the host path's instructions under valgrind (tests/mpi/hostpath_instr.sh)
[ "$cmd" = test ] && packages+=(python3-mpi4py valgrind)
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$p")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        die "missing packages: ${missing[*]} (run as root, or install them)"
    fi
fi

# ---- Open MPI 5.0 (Debian 13) --------------------------------------------------------------
# Its internal headers include PMIx's, and Debian's libopenmpi-dev lacks three headers that its
# other headers include: configure takes those from the source package of the same version
# (--with-ompi-src; README, "Open MPI 5.0").
ompi_version=$(ompi_info --version 2>/dev/null | sed -n '1s/.* v\([0-9.]*\).*/\1/p')
if [ "${ompi_version%.*}" = 5.0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && ! dpkg-query -W -f='${Status}' libpmix-dev 2>/dev/null | grep -q "install ok installed"; then
    say "installing: libpmix-dev (Open MPI 5.0's internal headers include PMIx's)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libpmix-dev >/dev/null
fi
if [ "${ompi_version%.*}" = 5.0 ] && [[ " ${CONFIGURE_FLAGS:-} " != *" --with-ompi-src="* ]]; then
    incdir=$(mpicc --showme:incdirs 2>/dev/null | tr ' ' '\n' | grep '/openmpi$' | head -1)
    if [ -n "$incdir" ] && [ ! -f "$incdir/opal/mca/threads/pthreads/threads_pthreads_mutex.h" ]; then
        src=$here/.ompi-src
        if [ ! -f "$src/VERSION" ]; then
            [ "$(id -u)" = 0 ] || die "Open MPI $ompi_version's development headers are incomplete: run as root (to fetch its source package) or give CONFIGURE_FLAGS=--with-ompi-src=DIR"
            say "fetching the source package of Open MPI $ompi_version (for headers libopenmpi-dev lacks)"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
            if ! apt-get source --help >/dev/null 2>&1 || ! grep -rqs '^deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
                die "no deb-src entry in apt's sources: add one (or give CONFIGURE_FLAGS=--with-ompi-src=DIR, an Open MPI $ompi_version source tree)"
            fi
            rm -rf "$src.get" && mkdir -p "$src.get"
            (cd "$src.get" && apt-get source -qq "openmpi=$(dpkg-query -W -f='${Version}' libopenmpi-dev)" >/dev/null) \
                || die "apt-get source openmpi failed"
            rm -rf "$src" && mv "$(find "$src.get" -maxdepth 1 -type d -name 'openmpi-*' | head -1)" "$src"
            rm -rf "$src.get"
        fi
        CONFIGURE_FLAGS="${CONFIGURE_FLAGS:-} --with-ompi-src=$src"
    fi
fi

# ---- build and install -------------------------------------------------------------------
say "building in $build, installing into $prefix"
cd "$here"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    ./autogen.sh >/dev/null 2>&1 || ./autogen.sh
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$here/configure" -nt config.status ]; then
    # shellcheck disable=SC2086
    "$here/configure" --prefix="$prefix" --enable-werror ${CONFIGURE_FLAGS:-} >configure.out 2>&1 \
        || { cat configure.out; die "configure failed"; }
    sed -n '/^coll\/gpu /,$p' configure.out
fi
make -j"$jobs" >make.out 2>&1 || { tail -50 make.out; die "build failed"; }
make install >install.out 2>&1 || { tail -30 install.out; die "install failed"; }

ompi_pkglibdir=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_mca_base_component_path="$prefix/lib/openmpi:$ompi_pkglibdir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 5.0's PMIx scans the same path and reports every file that is not a PMIx plugin
[ "${ompi_version%.*}" = 5.0 ] && export PMIX_MCA_mca_base_component_show_load_errors=none
export PATH="$prefix/bin:$PATH"
if ompi_info 2>/dev/null | grep -q "MCA coll: gpu"; then
    say "ompi_info: $(ompi_info | grep 'MCA coll: gpu' | sed 's/^ *//')"
else
    die "ompi_info does not list coll/gpu from $prefix/lib/openmpi"
fi

if [ "$cmd" = test ]; then
    say "make check"
    rc=0
    make -j"$jobs" check || rc=$?
    [ -f tests/test-suite.log ] && [ $rc -ne 0 ] && sed -n '/^FAIL\|^ERROR/,+40p' tests/test-suite.log | head -200
    "$here/tests/summary.sh" tests/test-suite.log
    exit $rc
fi

# ---- demo: the benchmark -----------------------------------------------------------------
ngpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$ngpus" -gt 0 ]; then
    device=cuda
    np=${NP:-$(( ngpus < 2 ? 2 : ngpus ))}
    range=(-b 8 -e 256M -f 4)
else
    device=emulated
    np=${NP:-2}
    range=(-b 8 -e 1M -f 8)
fi
say "coll_gpu_bench: allreduce, $np ranks, $device device (GPUs found: $ngpus)"
mpirun -np "$np" --oversubscribe --bind-to none \
    --mca coll gpu,tuned --mca coll_gpu_device "$device" \
    --mca btl self,vader --mca pml ob1 --mca btl_vader_single_copy_mechanism none \
    "$prefix/bin/coll_gpu_bench" -c allreduce -d "$device" -C "${range[@]}"
