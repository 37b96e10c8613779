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
    flight per ring, besides its stuck= reads and overflow= NOPs.

    The printed counts are exact. An SQE is counted once io_uring_submit has flushed it to the
    submission queue, and a ring is reported only after every counted SQE has produced its CQE
    and the kernel's SQ head confirms it consumed exactly that many plus the ring's stuck=
    reads (which are not counted), so sqes equals cqes.

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
            depth=N   ring entries, 1..32768 (default 64); also the in-flight limit
            batch=N   SQEs per io_uring_submit call (default 32, clamped to depth)
            n=N       create N identical rings from this SPEC (default 1)
            op=OP     nop, read or write: this ring's operation, in place of --op (read needs
                      --file; write is not for iopoll modes), so that one run can mix opcodes
                      with exact counts for each
            async     set IOSQE_ASYNC on every SQE of the ring (its stuck= reads included), so
                      the kernel punts each one to io-wq instead of issuing it inline. Not with
                      overflow=.
            max_workers=N
                      1..1024: limit the io-wq workers of each account (bound and unbound) to N
                      (IORING_REGISTER_IOWQ_MAX_WORKERS, Linux 5.15), right after setup. The
                      kernel applies it to each thread's io-wq that submits to the ring: with
                      max_workers=1 and async, each such thread has exactly one bound worker.
            overflow=K
                      1..1000000: send exactly K CQEs through the kernel's CQ overflow list,
                      once. At the start of the ring's thread, before its first normal SQE, the
                      ring submits C + K NOPs without reaping any CQE, where C is the default
                      CQ size (2 x depth rounded up to a power of two), in chunks of at most
                      sq_entries, each consumed by the kernel (for SQPOLL: by its SQ thread)
                      before the next; the first C fill the CQ, the last K overflow. With a
                      larger cq= the same burst overflows only what exceeds that CQ (none when
                      it holds all), which is how a larger CQ is shown to help. It then checks
                      that the kernel flagged the overflow (IORING_SQ_CQ_OVERFLOW), or did not
                      where none was due, and dropped nothing, and reaps all of them. These
                      NOPs are in the ring's sqes and cqes but outside count= and rate= (rate=
                      starts counting after them), and they are sent in full whatever the
                      duration, pauses or a signal say. Needs IORING_FEAT_NODROP (Linux 5.5);
                      not with async (io-wq would complete NOPs at times that cannot be seen
                      without reaping) nor iopoll modes. Kernels that refuse SQEs while CQEs
                      wait in the overflow list (-EBUSY, as 5.10 does) allow K up to
                      sq_entries only.
            stuck=N   1..4096, and N + depth at most cq_entries (2 x depth rounded up to a
                      power of two): right after the ring is set up, before its setup line, it
                      submits N IORING_OP_READs of 1 byte from a pipe that nobody ever writes
                      to (one pipe per process, open until it exits). They stay in flight for
                      the whole run and the hold (poll-armed on the pipe, or blocking an io-wq
                      worker where the kernel cannot poll it), and end only when the ring is
                      closed, which cancels them. They are not in sqes or cqes and are never
                      waited for. Not with iopoll modes. An SQPOLL ring of a kernel before 5.11
                      reads only registered files, so there the pipe is registered as its file 0.
            blocked=N 1..4096, and stuck + N + depth at most cq_entries: after the stuck=
                      reads, N IORING_OP_SPLICEs of 1 byte from the same pipe into /dev/null.
                      The kernel cannot arm a splice for poll, so each one blocks an io-wq
                      worker of the unbound account until the ring is closed: with the default
                      limits N workers, with max_workers=M at most M and the rest queued. Like
                      stuck=, not in sqes or cqes. Mode plain only (the main thread submits
                      them, so the workers are its io-wq's).
            cq=N      1..65536, at least depth: the CQ size (IORING_SETUP_CQSIZE), which the
                      kernel rounds up to a power of two; default 2 x depth, likewise rounded.
            direct    op=write only: the writes go to an O_DIRECT scratch file of their own,
                      whose depth blocks are written once before the run starts (a write that
                      allocates a block cannot be issued without blocking), so a filesystem
                      with nowait direct I/O issues every write inline instead of punting it
                      to io-wq.
            bufs=N    1..32768, op=read only, not iopoll: the reads select their buffer from a
                      provided-buffer ring (IORING_REGISTER_PBUF_RING, Linux 5.19) of N 4 KiB
                      buffers (IOSQE_BUFFER_SELECT), each given back as its CQE is reaped. With
                      N below the requests in flight, the reads that find none fail with
                      -ENOBUFS: the final line counts them (enobufs=) and they are not failures.
            fanout=N  1..1024, at most depth, mode plain without count=, rate=, async,
                      overflow= or bufs=: the ring submits nothing but bursts, one a second,
                      of N IORING_OP_SPLICEs of 1 byte from a pipe of its own into /dev/null.
                      Each blocks an io-wq worker until the ring writes N bytes into the pipe
                      20 ms later, so the process keeps N workers (with max_workers=M, M) that
                      wait for work between bursts. The splices are in sqes and cqes.
            pipes=N   1..4096, at most depth, mode plain with rate=, without count=, op=,
                      async, overflow=, bufs=, fanout=, stuck= or blocked=: completions that
                      come by task work. The ring keeps a 1-byte read in flight on each of N
                      pipes of its own; a writer thread writes rate= bytes a second into them,
                      one pipe after another. The ring's thread submits and waits for batch=
                      completions at a time (io_uring_submit_and_wait) and reads each pipe
                      again as its read completes. A read of an empty pipe is armed for poll,
                      and the write that fills it completes it by task work, which wakes the
                      waiting thread once per batch of task work. At the end the writer writes
                      a byte to every pipe, so every read completes. The reads are in sqes and
                      cqes.
            defer     pipes= rings only: IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN
                      (Linux 6.1): the task work waits for the ring's one submitter, which is
                      woken once a wait has batch= completions queued. The ring is made
                      disabled and enabled by the thread that submits, its single issuer.
            busy=P    1..100, pipes= rings only: the ring's thread does not wait in the
                      kernel. Each millisecond it computes in user space for P% of it and
                      sleeps the rest; between the two it reaps, and submits the reads again
                      (io_uring_submit). The task work that completes a read interrupts it
                      while it computes (an IPI from the writer's CPU), or wakes it asleep.
            coop      pipes= rings only, not with defer: IORING_SETUP_COOP_TASKRUN |
                      IORING_SETUP_TASKRUN_FLAG (Linux 5.19): the task work is not sent as an
                      IPI but waits for the thread's next system call; with busy= the thread
                      calls io_uring_get_events when the kernel sets IORING_SQ_TASKRUN.
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

    --op nop|read|write
        Operation to submit (default nop) on every ring without op=. read issues 4 KiB reads
        at random 4 KiB-aligned offsets of --file. write issues 4 KiB buffered writes of zeros
        to a scratch file the process creates in $TMPDIR (default /tmp) and unlinks at once,
        each in-flight slot its own block, so at most depth x 4 KiB of page cache per ring.
        A filesystem without nowait buffered writes (ext4 and tmpfs on 6.18) makes the kernel
        punt each write to io-wq, serialized per file (hashed work).

    --file PATH
        Regular file or block device for --op read and op=read. It must exist, be at least
        4 KiB and be openable with O_RDONLY|O_DIRECT.

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
    all rings are set up (stuck= reads and blocked= splices included), before the first
    normal or overflow= SQE:
        setup index=0 pid=1234 fd=5 mode=sqpoll sq_thread=1240 sqes=0 cqes=0
              setup_flags=0x2 sq_entries=64 cq_entries=128 op=nop async=0 stuck=0 blocked=0
                                                                  (one line each)
        ...
        started
    After every ring has finished and collected all its completions:
        ring index=0 pid=1234 fd=5 mode=sqpoll sq_thread=1240 sqes=10000 cqes=10000 ...
              op=nop async=0 stuck=0 blocked=0 overflowed=0 enobufs=0
        ...
        done rings=N sqes=TOTAL
    sq_thread is the SQ thread's TID from the SqThread: line of /proc/self/fdinfo/<fd> (the
    owner's thread for shared rings), or -1 for rings without SQPOLL or when unavailable.
    setup_flags, sq_entries and cq_entries are what io_uring_setup returned: the IORING_SETUP_*
    flags and the queue sizes the kernel chose.
    op is what the ring's normal SQEs are (op= or --op); async=1 when each SQE carried
    IOSQE_ASYNC; stuck the number of stuck= reads in flight from before the setup line until
    the ring is closed; blocked the number of blocked= splices, likewise; overflowed the
    number of CQEs that overflow= sent through the CQ overflow list (0 without it, and with a
    cq= that holds the burst); enobufs the bufs= reads that failed with -ENOBUFS (counted in
    cqes, not as failures). sqes counts the normal SQEs and, with overflow=K, the
    cq_entries_for(depth) + K NOPs of overflow=, so an op=read ring's reads are
    sqes - 2 x depth (rounded up to a power of two) - K then; it never counts the stuck= reads
    or blocked= splices. The kernel's SQ head ends at sqes + stuck + blocked.

    With --json the same information is printed as
        {"phase":"setup","index":0,"pid":1234,"fd":5,"mode":"sqpoll","sq_thread":1240,...,
         "op":"nop","async":false,"stuck":0,"blocked":0}
        {"started":true}
        {"phase":"final","index":0,"pid":1234,"fd":5,"mode":"sqpoll","sq_thread":1240,
         "sqes":10000,"cqes":10000,...,"op":"nop","async":false,"stuck":0,"blocked":0,
         "overflowed":0,"enobufs":0}
                                                                  (one line each)
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
    Every SQE punted to io-wq; 100 CQEs through the overflow list (sqes=1228: 1000 + 128 +
    100); 3 reads stuck in flight; and reads beside NOPs, each ring held open 5 s:
        iouscope-load --ring plain,count=1000,async --ring sqpoll,count=1000,overflow=100 \
                        --ring plain,count=10,stuck=3 --ring plain,count=500,op=read \
                        --file /var/tmp/blob --hold 5s

EXIT STATUS
    0   success, including a run stopped by SIGINT/SIGTERM
    1   system or io_uring failure: ring setup failed (the message includes strerror), a
        submit or wait failed, a completion carried an error, or a resource limit could not
        be raised; a ring with overflow= found no IORING_FEAT_NODROP or the kernel did not
        overflow exactly as planned; a stuck= read completed before its ring was closed
    2   invalid command line: unknown option, mode or key, malformed or negative number,
        unparsable duration, share= not naming an earlier sqpoll ring, missing --ring,
        --op read or op=read without a usable --file, overflow= or stuck= out of range or
        with a mode or key they exclude
)";

}  // namespace

const char* help_text() {
    return kHelp;
}

}  // namespace iouscope::load
