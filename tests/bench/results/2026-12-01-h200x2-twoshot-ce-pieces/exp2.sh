set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
w=$(mktemp -d); cd $w && tar xzf $OLDPWD/.probe/coll-gpu-0.1.0.tar.gz && cd coll-gpu-* && mkdir b && cd b && ../configure --with-cuda >/dev/null 2>&1 && make -j32 >/dev/null 2>&1 && make -C tests -j32 coll_gpu_bench >/dev/null 2>&1 || { echo build failed; exit 1; }
b=$PWD
pkglibdir=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_mca_base_component_path="$b/mca-coll-gpu/component:$pkglibdir"
export OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
B="mpirun -np 2 --bind-to none --map-by slot $b/tests/coll_gpu_bench -d cuda -T 2"
echo "#### check twoshot_ce 1M-256M"
$B -c allreduce -t float -o sum -B mpi:twoshot_ce,mpi -b 1M -e 256M -f 4 -C -n 2 -w 1 -F 2>&1 | grep -E "check:|wrong" | tail -2
echo "#### large allreduce 16M-512M, default chunk (16M, pull+reduce+push overlapped)"
$B -c allreduce -t float -o sum -B nccl,mpi,mpi:twoshot_ce -b 16M -e 512M -n 20 -w 3 -F 2>&1 | grep -E "^ +[0-9]"
for ch in 8388608 33554432 4194304; do
echo "#### twoshot_ce chunk $ch"
OMPI_MCA_coll_gpu_chunk_bytes=$ch $B -c allreduce -t float -o sum -B mpi:twoshot_ce -b 128M -e 512M -n 20 -w 3 -F 2>&1 | grep -E "^ +[0-9]"
done
