/*
 * test_dev_reduce.c - the op/type tables and every valid reduce, on the emulated backend
 * (operands in emulated device memory) and through dev_reduce_host, against the independent
 * oracle of test_dev_oracle.h; for binary16 and bfloat16 also every encoding and the rounding
 * of ties (oracle_check_half).
 */
#include "dev.h"
#include "tap.h"
#include "test_dev_oracle.h"

#include <stdio.h>
#include <string.h>

static void test_tables(void)
{
    bool matrix_ok = true;
    int mismatches = 0;

    for (int op = 0; op < DEV_OP_COUNT; ++op) {
        for (int t = 0; t < DEV_T_COUNT; ++t) {
            if (dev_op_valid((dev_op_t) op, (dev_dtype_t) t)
                != oracle_op_valid((dev_op_t) op, (dev_dtype_t) t)) {
                matrix_ok = false;
                if (++mismatches <= 5) {
                    tap_diag("dev_op_valid(%s, %s) disagrees with MPI",
                             dev_op_name((dev_op_t) op), dev_dtype_name((dev_dtype_t) t));
                }
            }
        }
    }
    tap_ok(matrix_ok, "dev_op_valid matches MPI's table for all %d x %d pairs", DEV_OP_COUNT,
           DEV_T_COUNT);

    /* spot checks, written out so that the table above is not the only witness */
    tap_ok(dev_op_valid(DEV_OP_SUM, DEV_T_CDOUBLE) && dev_op_valid(DEV_OP_PROD, DEV_T_CFLOAT),
           "SUM and PROD are defined on complex");
    tap_ok(!dev_op_valid(DEV_OP_MIN, DEV_T_CFLOAT) && !dev_op_valid(DEV_OP_MAX, DEV_T_CDOUBLE),
           "MIN and MAX are not defined on complex");
    tap_ok(dev_op_valid(DEV_OP_LXOR, DEV_T_BOOL) && !dev_op_valid(DEV_OP_BXOR, DEV_T_BOOL)
               && !dev_op_valid(DEV_OP_SUM, DEV_T_BOOL),
           "bool takes logical ops only");
    tap_ok(dev_op_valid(DEV_OP_BAND, DEV_T_UINT8) && !dev_op_valid(DEV_OP_BAND, DEV_T_FLOAT)
               && !dev_op_valid(DEV_OP_LAND, DEV_T_DOUBLE),
           "bitwise on bytes, no bitwise or logical op on floating point");
    tap_ok(dev_op_valid(DEV_OP_SUM, DEV_T_FLOAT16) && dev_op_valid(DEV_OP_PROD, DEV_T_BFLOAT16)
               && dev_op_valid(DEV_OP_MIN, DEV_T_BFLOAT16)
               && dev_op_valid(DEV_OP_MAX, DEV_T_FLOAT16)
               && !dev_op_valid(DEV_OP_LAND, DEV_T_FLOAT16)
               && !dev_op_valid(DEV_OP_BOR, DEV_T_BFLOAT16)
               && !dev_op_valid(DEV_OP_MAXLOC, DEV_T_FLOAT16),
           "float16 and bfloat16 take SUM, PROD, MIN and MAX only");
    tap_ok(dev_op_valid(DEV_OP_MINLOC, DEV_T_2INT) && !dev_op_valid(DEV_OP_MINLOC, DEV_T_INT32)
               && !dev_op_valid(DEV_OP_SUM, DEV_T_DOUBLE_INT),
           "MINLOC/MAXLOC on pair types only, and only they on pair types");
    tap_ok(!dev_op_valid(DEV_OP_COUNT, DEV_T_INT32) && !dev_op_valid(DEV_OP_SUM, DEV_T_COUNT),
           "out-of-range op and dtype are invalid");

    tap_ok(8 == dev_dtype_size(DEV_T_FLOAT_INT) && 16 == dev_dtype_size(DEV_T_DOUBLE_INT)
               && 16 == dev_dtype_size(DEV_T_LONG_INT) && 8 == dev_dtype_size(DEV_T_2INT)
               && 8 == dev_dtype_size(DEV_T_SHORT_INT),
           "pair sizes include C padding (8, 16, 16, 8, 8)");
    tap_ok(1 == dev_dtype_size(DEV_T_BOOL) && 8 == dev_dtype_size(DEV_T_CFLOAT)
               && 16 == dev_dtype_size(DEV_T_CDOUBLE) && 2 == dev_dtype_size(DEV_T_FLOAT16)
               && 2 == dev_dtype_size(DEV_T_BFLOAT16) && 0 == dev_dtype_size(DEV_T_COUNT),
           "bool, complex, 16-bit float and invalid sizes");
    tap_ok(0 == strcmp("maxloc", dev_op_name(DEV_OP_MAXLOC))
               && 0 == strcmp("double_complex", dev_dtype_name(DEV_T_CDOUBLE))
               && 0 == strcmp("float16", dev_dtype_name(DEV_T_FLOAT16))
               && 0 == strcmp("bfloat16", dev_dtype_name(DEV_T_BFLOAT16))
               && 0 == strcmp("invalid", dev_op_name(DEV_OP_COUNT))
               && 0 == strcmp("invalid", dev_dtype_name(DEV_T_COUNT)),
           "op and dtype names");
}

static void test_invalid_reduce(void)
{
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, d[3];
    int rc = dev_reduce_host(d, a, b, 3, DEV_T_FLOAT, DEV_OP_BXOR);
    tap_ok(DEV_ERR_UNSUPPORTED == rc && NULL != strstr(dev_error_string(), "bxor"),
           "dev_reduce_host(bxor, float) is DEV_ERR_UNSUPPORTED (%s)", dev_error_string());
    rc = dev_reduce(d, a, b, 3, DEV_T_2INT, DEV_OP_SUM, NULL);
    tap_ok(DEV_ERR_UNSUPPORTED == rc, "dev_reduce(sum, 2int) is DEV_ERR_UNSUPPORTED");
    tap_ok(DEV_OK == dev_reduce(d, a, b, 0, DEV_T_FLOAT, DEV_OP_SUM, NULL),
           "a reduce of zero elements is a no-op");
}

int main(void)
{
    test_tables();
    oracle_check_all_reduces("host", true);
    oracle_check_half("host", true);
    if (DEV_OK != dev_open(DEV_BACKEND_EMULATED)) {
        tap_ok(0, "dev_open(emulated): %s", dev_error_string());
        return tap_done();
    }
    test_invalid_reduce();
    oracle_check_all_reduces("emulated", false);
    oracle_check_half("emulated", false);
    dev_close();
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
