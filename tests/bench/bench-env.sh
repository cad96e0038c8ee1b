# bench-env.sh - sourced by the benchmark scripts (hostpath.sh, hostpath-instr.sh, kinds-cost.sh,
# run-gpu.sh): the Open MPI environment their runs share (host traffic over shared memory only,
# as root where needed), and pkglibdir, Open MPI's own component folder, for the component path.
pkglibdir=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none
