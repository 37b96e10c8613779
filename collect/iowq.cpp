// The io-wq worker reads (bpf/iouscope_req.bpf.c): the exits counted per process so far, then
// the walk of the live workers. The exits map's entries leave with their process (the exit
// program deletes them), so nothing here deletes.
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "collect/bpf_loader.hpp"
#include "collect/map_read.hpp"
#include "iouscope_req.skel.h"

namespace iouscope {

void BpfCollector::read_iowq(RawSample& raw) const {
    RequestSample& rq = raw.requests;
    rq.iowq_probe = objs_.req && workers_link_ && attached(ProbeId::iowq_workers);
    if (!rq.iowq_probe) return;
    rq.iowq_since_ns = objs_.req->bss->iowq_since_ns;
    read_hash(bpf_map__fd(objs_.req->maps.iowq_exits), rq.iowq_exits);
    if (!read_iter_records(bpf_link__fd(workers_link_), rq.workers)) {
        // The sample goes on without workers; the exits are still exact.
        spdlog::warn("reading the io-wq worker walk: {}", std::strerror(errno));
        rq.workers.clear();
        rq.iowq_probe = false;
    }
}

}  // namespace iouscope
