# runner-env.sh - sourced by the third-party runners of this folder once $build (a built tree of
# coll/gpu) is set: Open MPI's environment for a run on this machine with coll/gpu loaded.
#   - the component path: coll/gpu's build ahead of Open MPI's own components;
#   - root allowed, oversubscribed (4.1 takes that from here; 5.0's mpirun needs
#     --oversubscribe on its command line as well, which the runners pass);
#   - shared memory only (self and vader, ob1; no UCX one-sided), no single-copy mechanism
#     (containers often forbid it);
#   - Open MPI 5.0's PMIx reads the same component path and reports every file in it that is
#     not a PMIx plugin (mca_coll_gpu.so among them) in each log, where the runners look for
#     "error": told to keep quiet.
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_mca_base_component_path="$build/mca-coll-gpu/component:$pk"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export PMIX_MCA_mca_base_component_show_load_errors=none
