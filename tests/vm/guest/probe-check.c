// Loads and attaches each program of a BPF object on its own and prints one line per program:
//   <section> ok | <section> FAIL <stage>: <reason>
// Programs are tried one by one because libbpf fails a whole object when one program fails, and
// the point is to learn which attach points this kernel accepts. Built on the host by
// tests/vm/run (clang and gcc under TCG are slow) and run inside the guest from the shared root.
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char first_warning[512];

// libbpf explains a failed load (e.g. "failed to find kernel BTF type ID") only through its log
// callback. Its first warning names the cause; later ones ("failed to load object") only repeat
// that something failed. Keep the first as the reason and print nothing else.
static int keep_first_warning(enum libbpf_print_level level, const char *fmt, va_list ap) {
    if (level != LIBBPF_WARN || first_warning[0]) return 0;
    vsnprintf(first_warning, sizeof first_warning, fmt, ap);
    size_t n = strlen(first_warning);
    while (n > 0 && (first_warning[n - 1] == '\n' || first_warning[n - 1] == ' ')) first_warning[--n] = 0;
    return 0;
}

static void fail(const char *section, const char *stage, int err) {
    char buf[128];
    libbpf_strerror(err, buf, sizeof buf);
    printf("%s FAIL %s: %s%s%s\n", section, stage, buf, first_warning[0] ? " | " : "", first_warning);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OBJECT.bpf.o\n", argv[0]);
        return 2;
    }
    libbpf_set_print(keep_first_warning);

    struct bpf_object *probe = bpf_object__open_file(argv[1], NULL);
    if (!probe) {
        fprintf(stderr, "probe-check: cannot open %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    int count = 0;
    struct bpf_program *p;
    bpf_object__for_each_program(p, probe) count++;
    bpf_object__close(probe);

    for (int i = 0; i < count; i++) {
        struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
        if (!obj) return 2;
        struct bpf_program *mine = NULL;
        int j = 0;
        bpf_object__for_each_program(p, obj) {
            if (j++ == i)
                mine = p;
            else
                bpf_program__set_autoload(p, false);
        }
        const char *section = bpf_program__section_name(mine);
        first_warning[0] = 0;
        int err = bpf_object__load(obj);
        if (err) {
            fail(section, "load", err);
        } else {
            struct bpf_link *link = bpf_program__attach(mine);
            err = libbpf_get_error(link);
            if (err) {
                fail(section, "attach", err);
            } else {
                printf("%s ok\n", section);
                bpf_link__destroy(link);
            }
        }
        bpf_object__close(obj);
    }
    return 0;
}
