/*
 * Stand-in for an Open MPI header that ompi/op/op.h includes but that Debian's and Ubuntu's
 * development packages do not install.  op.h needs only OMPI_INT_2_FINT (for Fortran
 * user-defined ops, which call back through the Fortran integer type).  The compiler sees this
 * file only when the real one is absent (-idirafter).
 */
#ifndef COLL_GPU_SHIM_FINT_2_INT_H
#define COLL_GPU_SHIM_FINT_2_INT_H

#include "mpi.h"

#define OMPI_INT_2_FINT(a) ((MPI_Fint) (a))

#endif
