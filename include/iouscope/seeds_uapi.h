/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * io_uring setup flags of the seeds kernel: the unmerged patches in ../shared/seeds as ported to
 * 6.12 in tests/vm/kernels/seeds/NNNN-*.patch, where each patch's header says why its bit moved.
 * The seeds took bits that upstream has since given to other flags (7 to SUBMIT_ALL, 19 to
 * SQE_MIXED); the port puts them at the top of the word, where upstream, which allocates from
 * the bottom, will not reach them soon. The load generator sets them; a unit test
 * (SeedsUapi.PatchesDefineTheseBits) holds these values to the patches.
 *
 * A kernel without a patch refuses its flag with EINVAL, as it does any unknown setup flag.
 */
#ifndef IOUSCOPE_SEEDS_UAPI_H
#define IOUSCOPE_SEEDS_UAPI_H

/* Seed 000: rings with SQPOLL | SQ_AFF | SQPOLL_PERCPU share one SQ thread per CPU, across
 * processes (the thread belongs to the process that made it). */
#define IOU_SEEDS_SETUP_SQPOLL_PERCPU (1U << 28)
/* Seed 002: sq_thread_idle is in nanoseconds (still a __u32: at most 4.29 s). */
#define IOU_SEEDS_SETUP_IDLE_NS (1U << 29)
/* Seed 004: the SQ thread accounts work_time (fdinfo SqWorkTime) only when a ring asks. */
#define IOU_SEEDS_SETUP_SQTHREAD_STATS (1U << 30)

#endif
