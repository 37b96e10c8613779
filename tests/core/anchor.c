/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Compiled once per layout, for the host: clang -g -c -include layouts/<layout>.h anchor.c.
 * clang emits DWARF (and so pahole -J emits BTF) only for types the translation unit uses; these
 * definitions use every struct that iou_iter_rings relocates against, so the layout's BTF has
 * them all. Nothing here runs.
 */
struct bpf_iter__task_file iou_anchor_iter;
struct bpf_iter_meta iou_anchor_meta;
struct file iou_anchor_file;
struct file_operations iou_anchor_fops;
struct task_struct iou_anchor_task;
struct io_ring_ctx iou_anchor_ctx;
struct io_rings iou_anchor_rings;
struct io_sq_data iou_anchor_sqd;
