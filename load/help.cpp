// The help page of iouscope-load: the user-facing contract of its flags, ring SPEC grammar,
// printed report and exit status. Tests parse the report it describes, so change both together.
#include "command_line.hpp"

namespace iouscope::load {

namespace {

constexpr const char* kHelp = R"(NAME
    iouscope-load - io_uring load generator with exact per-ring SQE counts

SYNOPSIS
    iouscope-load [OPTIONS] --ring SPEC [--ring SPEC ...]

DESCRIPTION
    Creates one io_uring per ring (in command-line order, so share= can name an earlier ring),
    then drives every ring from its own thread: it submits NOP or 4 KiB O_DIRECT read SQEs in
    batches, optionally rate limited, and reaps the completions. At most depth SQEs are in
    flight per ring.

    The printed counts are exact. An SQE is counted once io_uring_submit has flushed it to the
    submission queue, and a ring is reported only after every counted SQE has produced its CQE
    and the kernel's SQ head confirms it consumed exactly that many, so sqes equals cqes.

OPTIONS
    --ring SPEC
        Add a ring; repeatable, at least one is required. SPEC is MODE[,key=value...].
        MODE:
            plain          ordinary ring, submission through io_uring_enter
            sqpoll         IORING_SETUP_SQPOLL: a kernel SQ thread consumes the queue
            iopoll         IORING_SETUP_IOPOLL: completions are polled; reads need a device
                           with poll queues, and whether NOPs work is up to the kernel
            sqpoll+iopoll  both
        Keys:
            count=N   total SQEs to submit on this ring; 0 (default) = until the run ends
            rate=N    SQEs per second; 0 (default) = as fast as possible
            share=I   attach to the SQ thread of ring I (IORING_SETUP_ATTACH_WQ with that
                      ring's fd). I is a ring index as printed in the report (after n=
                      expansion) and must be an earlier sqpoll ring. sqpoll modes only.
            idle=MS   sq_thread_idle in milliseconds (default 10). sqpoll modes without share=;
                      a shared ring inherits its owner's value.
            cpu=N     pin the SQ thread to CPU N (IORING_SETUP_SQ_AFF). sqpoll modes without
                      share=.
        Keys and flags of the seeds kernel (tests/vm/run --kernel seeds), which other kernels
        refuse with a message saying so:
            idle_ns=N sq_thread_idle in nanoseconds (IORING_SETUP_IDLE_NS), 0..4294967295, in
                      place of idle=. A shared ring inherits it.
            percpu    share the one SQ thread of CPU cpu=N with every other percpu ring on that
                      CPU, of this process or any other (IORING_SETUP_SQPOLL_PERCPU). Needs
                      cpu=; the thread belongs to the process that made it, and the kernel
                      serves only NOPs for the rings of other processes.
            stats     turn on the SQ thread's work-time accounting (IORING_SETUP_SQTHREAD_STATS,
                      fdinfo SqWorkTime); allowed with share=, where it turns it on late.
            depth=N   ring entries, 1..32768 (default 64); also the in-flight limit
            batch=N   SQEs per io_uring_submit call (default 32, clamped to depth)
            n=N       create N identical rings from this SPEC (default 1)

    --op nop|read
        Operation to submit (default nop). read issues 4 KiB reads at random 4 KiB-aligned
        offsets of --file.

    --file PATH
        Regular file or block device for --op read. It must exist, be at least 4 KiB and be
        openable with O_RDONLY|O_DIRECT.

    --duration D
        Stop submitting D after the start. Without it, the run ends once every ring that has a
        count has submitted it, and rings without a count stop at that moment too. Giving
        neither a duration nor any count is an error.

    --pause-every D, --pause-for D
        Given together: after every D of submitting, all rings stop submitting for the
        --pause-for time. The windows follow one steady-clock schedule shared by all rings and
        anchored at the start, so SQ threads go idle and sleep during them. rate= only accrues
        outside pauses, so there is no burst afterwards.

    --hold D|inf
        After the final report, keep all rings (and their SQ threads) open for D, or until
        SIGINT/SIGTERM with inf. Default 0.

    --cycles N, --gap D
        Do the whole run N times: create the rings, submit, report, hold, close them, wait D
        (default 0), and again. Each cycle's report follows a line "cycle K" (JSON:
        {"cycle":K}). A closed ring's memory is soon reused by the next ring, so this is how
        rings that come and go look to an observer. A signal ends the run after the current
        cycle's report.

    --json
        Print the report as one JSON object per line instead of key=value lines.

    -h, --help
        Print this help and exit 0.

    D is a number with a unit: ns, us, ms, s, m or h, e.g. 500ms, 10s, 1.5m.

OUTPUT
    stdout carries only the report, and every line is flushed as it is printed. Right after
    all rings are set up, before the first submission:
        setup index=0 pid=1234 fd=5 mode=sqpoll sq_thread=1240 sqes=0 cqes=0
              setup_flags=0x2 sq_entries=64 cq_entries=128        (one line each)
        ...
        started
    After every ring has finished and collected all its completions:
        ring index=0 pid=1234 fd=5 mode=sqpoll sq_thread=1240 sqes=10000 cqes=10000 ...
        ...
        done rings=N sqes=TOTAL
    sq_thread is the SQ thread's TID from the SqThread: line of /proc/self/fdinfo/<fd> (the
    owner's thread for shared rings), or -1 for rings without SQPOLL or when unavailable.
    setup_flags, sq_entries and cq_entries are what io_uring_setup returned: the IORING_SETUP_*
    flags and the queue sizes the kernel chose.

    With --json the same information is printed as
        {"phase":"setup","index":0,"pid":1234,"fd":5,"mode":"sqpoll","sq_thread":1240,...}
        {"started":true}
        {"phase":"final","index":0,"pid":1234,"fd":5,"mode":"sqpoll","sq_thread":1240,
         "sqes":10000,"cqes":10000}      (one line each)
        {"done":true,"rings":N,"sqes":TOTAL}

    If stderr is a terminal and the run lasts more than 2 s, a progress line (SQEs so far and
    the current rate) is refreshed on stderr once per second. Warnings and errors also go to
    stderr.

SIGNALS
    SIGINT or SIGTERM during the run stops submission; in-flight SQEs are still waited for, the
    report is printed and the exit status is 0 (no hold follows). During --hold they end the
    hold. A second signal while waiting for completions exits at once with status 1.

EXAMPLES
    Two rings sharing one SQ thread, plus a plain ring:
        iouscope-load --ring sqpoll,count=100000 --ring sqpoll,share=0,count=5000 \
                        --ring plain,count=7777
    A slow SQPOLL ring whose SQ thread sleeps between SQEs, kept open 3 s afterwards:
        iouscope-load --ring sqpoll,rate=50,idle=5 --duration 2s --hold 3s
    Submit for 2 s, pause 1 s, repeat for 10 s, JSON report:
        iouscope-load --ring sqpoll,rate=10000 --duration 10s --pause-every 2s \
                        --pause-for 1s --json
    1000 plain rings submitting for 1 s, then held open 2 s:
        iouscope-load --ring plain,n=1000 --duration 1s --hold 2s
    O_DIRECT random reads through an SQ thread pinned to CPU 1:
        iouscope-load --ring sqpoll,cpu=1,count=100000 --op read --file /var/tmp/blob

EXIT STATUS
    0   success, including a run stopped by SIGINT/SIGTERM
    1   system or io_uring failure: ring setup failed (the message includes strerror), a
        submit or wait failed, a completion carried an error, or a resource limit could not
        be raised
    2   invalid command line: unknown option, mode or key, malformed or negative number,
        unparsable duration, share= not naming an earlier sqpoll ring, missing --ring,
        --op read without a usable --file
)";

}  // namespace

const char* help_text() {
    return kHelp;
}

}  // namespace iouscope::load
