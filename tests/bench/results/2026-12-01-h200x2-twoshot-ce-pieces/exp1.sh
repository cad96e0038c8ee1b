set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
w=$(mktemp -d); cd $w && tar xzf $OLDPWD/.probe/coll-gpu-0.1.0.tar.gz && cd coll-gpu-* && mkdir b && cd b && ../configure --with-cuda >/dev/null 2>&1 && make -j32 >/dev/null 2>&1 && make -C tests -j32 coll_gpu_bench >/dev/null 2>&1 || { echo build failed; exit 1; }
b=$PWD
pkglibdir=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_mca_base_component_path="$b/mca-coll-gpu/component:$pkglibdir"
export OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
B="mpirun -np 2 --bind-to none --map-by slot $b/tests/coll_gpu_bench -d cuda -T 2"
echo "#### small allreduce, 16K-64K, 300 iters"
$B -c allreduce -t float -o sum -B mpi,nccl,mpi:fused -b 4K -e 64K -n 300 -w 20 -F 2>&1 | grep -E "^ +[0-9]|floor" | grep -v "^#"
echo "#### large allreduce 64M-512M, default chunk"
$B -c allreduce -t float -o sum -B nccl,mpi:twoshot,mpi:twoshot_ce,mpi:oneshot -b 64M -e 512M -n 20 -w 3 -F 2>&1 | grep -E "^ +[0-9]"
for ch in 4194304 16777216 33554432; do
echo "#### twoshot_ce chunk $ch"
OMPI_MCA_coll_gpu_chunk_bytes=$ch $B -c allreduce -t float -o sum -B mpi:twoshot_ce -b 128M -e 512M -n 20 -w 3 -F 2>&1 | grep -E "^ +[0-9]"
done
