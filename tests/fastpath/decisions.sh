# decisions.sh - sourced by the scripts that force a fast-path algorithm onto test_coll's cases
# (fastpath/fastpath.sh, gpu/fastpath_cuda.sh): checks that EVERY call that asked for the
# algorithm took it, not that one log line somewhere names it.
#
# check_decisions OUT DIR COLL ALG NP
#   OUT   test_coll's TAP output (mpirun's stdout)
#   DIR   run-mpi.sh's COLL_GPU_TEST_RANK_LOGS folder: each rank's coll_gpu_verbose log in a
#         file of its own (DIR/1/rank.N/stderr), since mpirun's merged stderr may cut one rank's
#         line with a piece of another's
#   COLL  allreduce | bcast;  ALG the forced algorithm, or "auto"
#   NP    the number of ranks
# Sets dec_calls (decision lines checked), dec_taken (of them, the forced algorithm),
# dec_staged (staging the case asked for) and dec_msg (a diagnostic, empty when all is well);
# returns 0 when every call is accounted for.
#
# How the calls are matched with the cases: each rank logs one decision line per call
# ("coll:gpu:bcast (cid 3): rank 1: 4096 B MPI_INT, 2 ranks -> chain via ..."), in call order,
# into its own file; test_coll makes one call per case on every rank (on the communicator of the
# case, which holds every rank: world, dup, the halves of a split, or self).  A process logs
# nothing for a count of 0, nor for a bcast on a communicator of
# one rank (MPI_Bcast returns before the component is called).  So the decision lines of every
# process, in order, are the cases in order less those, exactly.  A call may stage only where
# the case itself asks for it:
#   - its communicator holds one rank ("1 ranks": nothing to exchange between GPUs);
#   - its type is derived or its op user-defined (not MPI_...), or it is a predefined type
#     without a GPU kernel or with holes (the reason "type, op or layout without a GPU kernel").
# Any other decision (another algorithm, staging for any other reason) fails.
check_decisions() {
    dec_out=$(awk -v coll="$3" -v alg="$4" -v np="$5" -v tapfile="$1" '
        function fail(msg) {
            if (nbad < 5) {
                bad = bad (bad == "" ? "" : "; ") msg
            }
            ++nbad
        }
        BEGIN {
            # predefined types that the GPU path does not take: no reduction kernel (allreduce),
            # or a layout with holes (the pair types whose members leave padding)
            # (allreduce stages the padded MINLOC/MAXLOC pairs as well: coll_gpu_select.c)
            if (coll == "allreduce") {
                nokernel["MPI_LONG_DOUBLE"] = 1
            }
            {
                nokernel["MPI_DOUBLE_INT"] = 1
                nokernel["MPI_LONG_INT"] = 1
                nokernel["MPI_SHORT_INT"] = 1
                nokernel["MPI_LONG_DOUBLE_INT"] = 1
            }
        }
        # the size of the communicator of world rank r in a case (test_coll.c: setup_comms)
        function comm_size(name, r) {
            if (name ~ / self( |$)/) {
                return 1
            }
            if (name ~ / split\(odd\/even\)( |$)/) {
                return (r % 2 == 0) ? int((np + 1) / 2) : int(np / 2)
            }
            if (name ~ / split\(uneven\)( |$)/) {
                return (r == np - 1) ? 1 : np - 1
            }
            return np
        }
        # the cases, in order (rank 0 prints them)
        FILENAME == tapfile && /^(not )?ok [0-9]+ - / {
            name = $0
            sub(/^(not )?ok [0-9]+ - /, "", name)
            if (index(name, coll " ") != 1) {
                next
            }
            if (name !~ /count=0( |$)/) {
                cases[++ncases] = name
            }
            next
        }
        # the decisions, in order per process
        FILENAME != tapfile && index($0, "coll:gpu:" coll " (cid ") && / ranks -> / {
            proc = FILENAME
            sub(/\/stderr$/, "", proc)
            sub(/^.*\/rank\./, "", proc)
            if (!(proc in nlines)) {
                procs[++nprocs] = proc
            }
            k = ++nlines[proc]
            how = $0
            sub(/.* ranks -> /, "", how)
            one_rank = ($0 ~ /, 1 ranks -> /)
            lines[proc, k] = how
            ones[proc, k] = one_rank
        }
        END {
            calls = 0; taken = 0; staged = 0
            if (nprocs != np) {
                fail(sprintf("%d ranks logged %s decisions, %d ran", nprocs, coll, np))
            }
            for (p = 1; p <= nprocs; ++p) {
                proc = procs[p]
                r = proc + 0
                # the cases this process logs a decision for, in order
                n = 0
                for (c = 1; c <= ncases; ++c) {
                    s = comm_size(cases[c], r)
                    if (!(coll == "bcast" && s == 1)) {
                        mine[++n] = c
                    }
                }
                if (nlines[proc] != n) {
                    fail(sprintf("rank %d logged %d %s decisions for %d calls", r, nlines[proc],
                                 coll, n))
                }
                for (k = 1; k <= nlines[proc] && k <= n; ++k) {
                    how = lines[proc, k]
                    name = cases[mine[k]]
                    ++calls
                    split(name, w, " ")
                    # a derived type, or a user-defined op (w[3] is "-" for a bcast)
                    derived = (w[2] !~ /^MPI_/) || (w[3] != "-" && w[3] !~ /^MPI_/)
                    if (alg == "auto" ? how ~ /^[a-z]+ via / : index(how, alg " via ") == 1) {
                        ++taken
                    } else if (alg == "oneshot" && how ~ /^twoshot via .*exceed the one-shot slot/) {
                        ++taken  # one-shot holds one slot of data: above it, two-shot by design
                    } else if (alg == "oneshot" && how ~ /^twoshot via .*in place: two-shot/) {
                        ++taken  # in place, two-shot needs no copy: the in-place form of one-shot
                    } else if (how ~ /^staged \(/ && (ones[proc, k] ||
                               (how ~ /without a GPU kernel/ && (derived || w[2] in nokernel)))) {
                        ++staged
                    } else {
                        fail(sprintf("case \"%s\": rank %d took \"%s\"", name, r,
                                     substr(how, 1, 70)))
                    }
                }
            }
            if (taken == 0) {
                fail("no call took " (alg == "auto" ? "a fast-path algorithm" : alg))
            }
            if (nbad > 5) {
                bad = bad sprintf("; and %d more", nbad - 5)
            }
            printf "%d %d %d %s\n", calls, taken, staged, bad
        }' "$1" "$2"/*/rank.*/stderr)
    set -- $dec_out
    dec_calls=$1 dec_taken=$2 dec_staged=$3
    shift 3
    dec_msg="$*"
    [ -z "$dec_msg" ]
}
