// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Helper for tests/core/run; built by it against the system libbpf (the one iouscoped links).
 *
 *   relocate load OBJ TARGET_BTF PROG
 *     Opens OBJ with btf_custom_path = TARGET_BTF, so that libbpf performs CO-RE relocation against
 *     TARGET_BTF instead of /sys/kernel/btf/vmlinux, turns autoload off for every program but PROG,
 *     and calls bpf_object__load(). libbpf's whole log goes to stdout at debug level: its
 *     "relo #N: ..." lines are what the test checks. The last line is "RESULT load <err>", err
 *     being 0 when the kernel's verifier accepted the relocated PROG. Only the program is loaded;
 *     nothing is attached, and everything is closed again before exit.
 *
 *   relocate fields BTF < "TYPE PATH" lines
 *     For each line prints "TYPE PATH OFFSET SIZE" (bytes), or "TYPE PATH -" when BTF has no such
 *     member. PATH is dotted (se.sum_exec_runtime); members of anonymous structs and unions are
 *     found the way C finds them. The test uses it for the widths of the BPF object's own (local)
 *     types: BPF_CORE_READ copies sizeof(local member) bytes whatever the kernel's member is.
 *
 * Exit status: 0 when the command ran (whatever the load result), 2 on usage or open errors.
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int print_all(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	return vfprintf(stdout, fmt, args);
}

static int cmd_load(const char *obj_path, const char *btf_path, const char *prog_name)
{
	libbpf_set_print(print_all);
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = btf_path);
	struct bpf_object *obj = bpf_object__open_file(obj_path, &opts);
	if (!obj) {
		fprintf(stderr, "relocate: cannot open %s: %s\n", obj_path, strerror(errno));
		return 2;
	}

	bool found = false;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		bool want = strcmp(bpf_program__name(prog), prog_name) == 0;
		found |= want;
		bpf_program__set_autoload(prog, want);
	}
	if (!found) {
		fprintf(stderr, "relocate: %s has no program %s\n", obj_path, prog_name);
		bpf_object__close(obj);
		return 2;
	}

	int err = bpf_object__load(obj);
	fflush(stdout);
	printf("\nRESULT load %d\n", err);
	bpf_object__close(obj);
	return 0;
}

/* Finds member `name` in struct/union `type_id`, descending into anonymous members. */
static bool find_member(const struct btf *btf, __u32 type_id, const char *name, __u32 *bit_off,
			__u32 *member_type)
{
	const struct btf_type *t = btf__type_by_id(btf, btf__resolve_type(btf, type_id));
	if (!t || (!btf_is_struct(t) && !btf_is_union(t)))
		return false;

	const struct btf_member *m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);
		__u32 off = btf_member_bit_offset(t, i);
		if (mname && *mname) {
			if (strcmp(mname, name) == 0) {
				*bit_off = off;
				*member_type = m->type;
				return true;
			}
			continue;
		}
		__u32 inner_off, inner_type;
		if (find_member(btf, m->type, name, &inner_off, &inner_type)) {
			*bit_off = off + inner_off;
			*member_type = inner_type;
			return true;
		}
	}
	return false;
}

static int cmd_fields(const char *btf_path)
{
	struct btf *btf = btf__parse(btf_path, NULL);
	if (!btf) {
		fprintf(stderr, "relocate: cannot read BTF from %s: %s\n", btf_path, strerror(errno));
		return 2;
	}

	char type_name[256], path[512];
	while (scanf("%255s %511s", type_name, path) == 2) {
		__s32 id = btf__find_by_name_kind(btf, type_name, BTF_KIND_STRUCT);
		if (id < 0)
			id = btf__find_by_name_kind(btf, type_name, BTF_KIND_UNION);
		__u32 cur = id < 0 ? 0 : (__u32)id, bits = 0;
		bool ok = id >= 0;

		char walk[512];
		snprintf(walk, sizeof(walk), "%s", path);
		for (char *save = NULL, *part = strtok_r(walk, ".", &save); ok && part;
		     part = strtok_r(NULL, ".", &save)) {
			__u32 off, member_type;
			ok = find_member(btf, cur, part, &off, &member_type);
			if (ok) {
				bits += off;
				cur = member_type;
			}
		}
		if (ok)
			printf("%s %s %u %lld\n", type_name, path, bits / 8,
			       (long long)btf__resolve_size(btf, cur));
		else
			printf("%s %s -\n", type_name, path);
	}
	btf__free(btf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "load") == 0)
		return cmd_load(argv[2], argv[3], argv[4]);
	if (argc == 3 && strcmp(argv[1], "fields") == 0)
		return cmd_fields(argv[2]);
	fprintf(stderr, "usage: %s load OBJ TARGET_BTF PROG\n"
			"       %s fields BTF < 'TYPE PATH' lines\n", argv[0], argv[0]);
	return 2;
}
