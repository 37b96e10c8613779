#include "tests/live/harness.hpp"

#include <bpf/bpf.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace live {

using namespace std::chrono;

Child::Child(std::vector<std::string> argv, bool merge_stderr) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        dup2(p[1], STDOUT_FILENO);
        if (merge_stderr) dup2(p[1], STDERR_FILENO);
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    close(p[1]);
    out_ = p[0];
}

Child::~Child() {
    if (!status_) {
        signal(SIGTERM);
        if (!wait(seconds(5))) {
            signal(SIGKILL);
            wait(seconds(5));
        }
    }
    if (out_ >= 0) close(out_);
}

void Child::signal(int sig) {
    if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<std::string> Child::read_line(milliseconds timeout) {
    auto deadline = steady_clock::now() + timeout;
    for (;;) {
        if (auto nl = buf_.find('\n'); nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
        if (left <= 0 || out_ < 0) return std::nullopt;
        pollfd pfd{out_, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
        char tmp[4096];
        ssize_t n = ::read(out_, tmp, sizeof tmp);
        if (n <= 0) {
            close(out_);
            out_ = -1;
            if (buf_.empty()) return std::nullopt;
            return std::exchange(buf_, {});
        }
        buf_.append(tmp, static_cast<std::size_t>(n));
        all_.append(tmp, static_cast<std::size_t>(n));
    }
}

std::string Child::drain(milliseconds timeout) {
    auto deadline = steady_clock::now() + timeout;
    while (out_ >= 0 && steady_clock::now() < deadline)
        read_line(duration_cast<milliseconds>(deadline - steady_clock::now()));
    return all_;
}

std::optional<int> Child::wait(milliseconds timeout) {
    if (status_) return status_;
    auto deadline = steady_clock::now() + timeout;
    do {
        int st = 0;
        pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return status_;
        }
        std::this_thread::sleep_for(milliseconds(10));
    } while (steady_clock::now() < deadline);
    return std::nullopt;
}

namespace {

size_t append_body(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

}  // namespace

HttpResponse http_get(const std::string& url, const std::string& ca_file,
                      const std::string& userpwd) {
    HttpResponse r;
    CURL* c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (!ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca_file.c_str());
    if (!userpwd.empty()) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        r.error = curl_easy_strerror(rc);
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(c);
    return r;
}

int free_port() {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    close(s);
    return ntohs(a.sin_port);
}

std::vector<Series> parse_exposition(const std::string& text) {
    std::vector<Series> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        Series s;
        std::size_t i = line.find_first_of("{ ");
        s.name = line.substr(0, i);
        if (i != std::string::npos && line[i] == '{') {
            ++i;
            while (i < line.size() && line[i] != '}') {
                auto eq = line.find('=', i);
                std::string key = line.substr(i, eq - i);
                std::string val;
                std::size_t j = eq + 2;  // skip ="
                for (; j < line.size() && line[j] != '"'; ++j) {
                    if (line[j] == '\\' && j + 1 < line.size()) {
                        ++j;
                        val += line[j] == 'n' ? '\n' : line[j];
                    } else {
                        val += line[j];
                    }
                }
                s.labels[key] = val;
                i = j + 1;
                if (i < line.size() && line[i] == ',') ++i;
            }
            i = line.find(' ', i);
        }
        s.value = std::stod(line.substr(i + 1));
        out.push_back(std::move(s));
    }
    return out;
}

bool labels_match(const Series& s, const std::map<std::string, std::string>& match) {
    for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) return false;
    }
    return true;
}

std::optional<double> find_value(const std::vector<Series>& all, const std::string& name,
                                 const std::map<std::string, std::string>& match) {
    for (const auto& s : all)
        if (s.name == name && labels_match(s, match)) return s.value;
    return std::nullopt;
}

double sum_values(const std::vector<Series>& all, const std::string& name,
                  const std::map<std::string, std::string>& match) {
    double sum = 0;
    for (const auto& s : all)
        if (s.name == name && labels_match(s, match)) sum += s.value;
    return sum;
}

std::optional<std::string> live_tier_unavailable() {
    if (geteuid() != 0) return "needs root to load BPF programs";
    if (!std::filesystem::exists("/sys/kernel/btf/vmlinux")) return "kernel has no BTF";
    std::ifstream dis("/proc/sys/kernel/io_uring_disabled");
    int disabled = 0;
    if (dis >> disabled && disabled != 0) return "io_uring is disabled on this host";
    return std::nullopt;
}

bool in_vm_guest() {
    const char* vm = std::getenv("IOUSCOPE_VM");
    return vm != nullptr && std::string(vm) == "1";
}

bool eventually(milliseconds timeout, const std::function<bool()>& pred) {
    auto deadline = steady_clock::now() + timeout;
    for (;;) {
        if (pred()) return true;
        if (steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(milliseconds(50));
    }
}

std::string build_dir() {
    return IOUSCOPE_BUILD_DIR;
}

std::string load_bin() {
    return build_dir() + "/iouscope-load";
}

std::string cli_bin() {
    return build_dir() + "/iouscope";
}

std::string base_url(Daemon& d) {
    auto u = d.url();
    return u.substr(0, u.find('/', std::string("http://").size()));
}

bool probe_attached(Daemon& d, const std::string& probe) {
    return find_value(d.scrape(), "iouscope_probe_attached", {{"probe", probe}}) ==
           std::optional<double>(1);
}

std::string read_first_line(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
}

// The hidden per-controller disks of a multipath head: nvme<S>c<C>n<N> for head nvme<S>n<N>
// (the kernel's naming; /sys/block/<head>/multipath/ lists them only from 6.14 on). A disk
// without paths is its own.
std::vector<std::string> path_disks(const std::string& disk) {
    std::vector<std::string> out;
    std::smatch m;
    const std::regex head_name(R"(nvme(\d+)n(\d+))");
    if (std::regex_match(disk, m, head_name)) {
        const std::regex path_name("nvme" + m[1].str() + R"(c\d+n)" + m[2].str());
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator("/sys/block", ec)) {
            const auto n = e.path().filename().string();
            if (std::regex_match(n, path_name)) out.push_back(n);
        }
    }
    if (out.empty()) out.push_back(disk);
    std::sort(out.begin(), out.end());
    return out;
}

std::string probe_off_reason(const std::string& startup_log, const std::string& probe) {
    std::istringstream in(startup_log);
    std::string line;
    const std::string head = "probe " + probe + " (";
    while (std::getline(in, line)) {
        const auto at = line.find(head);
        if (at == std::string::npos) continue;
        const auto off = line.find("): off, ", at);
        if (off != std::string::npos) return line.substr(off + 8);
    }
    return "";
}

bool kernel_lacks(const std::string& reason) {
    static const char* const absent[] = {"no BTF",
                                         "no kernel symbol",
                                         "no trace event",
                                         "kernel has no kprobes",
                                         "module ",
                                         "deep tier off",
                                         "fentry disabled by --no-fentry",
                                         "load failed: Operation not permitted"};
    if (reason.empty()) return false;
    std::size_t start = 0;
    while (start < reason.size()) {
        auto end = reason.find("; ", start);
        if (end == std::string::npos) end = reason.size();
        const std::string part = reason.substr(start, end - start);
        // "KIND: DETAIL"; a prototype mismatch reads "FUNC has N parameters, this variant ...".
        const auto colon = part.find(": ");
        const std::string detail = colon == std::string::npos ? part : part.substr(colon + 2);
        bool lacks = detail.find(" parameters, this variant expects ") != std::string::npos;
        for (const char* a : absent) lacks = lacks || detail.rfind(a, 0) == 0;
        if (!lacks) return false;
        start = end + 2;
    }
    return true;
}

Daemon::Daemon(std::vector<std::string> extra_args) : Daemon(std::move(extra_args), {}) {}

Daemon::Daemon(std::vector<std::string> extra_args, std::vector<std::string> wrapper)
    : port_(free_port()) {
    std::vector<std::string> argv = std::move(wrapper);
    argv.push_back(build_dir() + "/iouscoped");
    argv.push_back("--web.listen-address=127.0.0.1:" + std::to_string(port_));
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    child_ = std::make_unique<Child>(argv, /*merge_stderr=*/true);
    // Ready once it says it serves; a daemon that cannot start exits and we keep its log.
    // Generous: under QEMU TCG, loading BTF and the symbol table takes tens of seconds.
    while (auto line = child_->read_line(seconds(120))) {
        log_ += *line + "\n";
        if (line->find("serving metrics") != std::string::npos) {
            ready_ = true;
            break;
        }
    }
}

std::string Daemon::url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/metrics";
}

std::vector<Series> Daemon::scrape() {
    auto r = http_get(url());
    if (r.status != 200) return {};
    return parse_exposition(r.body);
}

std::optional<LoadRing> parse_load_line(const std::string& line, const std::string& kind) {
    std::istringstream in(line);
    std::string word;
    if (!(in >> word) || word != kind) return std::nullopt;
    LoadRing r;
    while (in >> word) {
        auto eq = word.find('=');
        if (eq == std::string::npos) continue;
        std::string k = word.substr(0, eq), v = word.substr(eq + 1);
        if (k == "index")
            r.index = std::stoi(v);
        else if (k == "pid")
            r.pid = std::stoi(v);
        else if (k == "fd")
            r.fd = std::stoi(v);
        else if (k == "mode")
            r.mode = v;
        else if (k == "sq_thread")
            r.sq_thread = std::stoi(v);
        else if (k == "sqes")
            r.sqes = std::stoull(v);
        else if (k == "cqes")
            r.cqes = std::stoull(v);
        else if (k == "setup_flags")
            r.setup_flags = static_cast<unsigned>(std::stoul(v, nullptr, 0));
        else if (k == "sq_entries")
            r.sq_entries = static_cast<unsigned>(std::stoul(v));
        else if (k == "cq_entries")
            r.cq_entries = static_cast<unsigned>(std::stoul(v));
        else if (k == "op")
            r.op = v;
        else if (k == "async")
            r.async = v == "1";
        else if (k == "stuck")
            r.stuck = std::stoull(v);
        else if (k == "blocked")
            r.blocked = std::stoull(v);
        else if (k == "overflowed")
            r.overflowed = std::stoull(v);
        else if (k == "enobufs")
            r.enobufs = std::stoull(v);
    }
    return r;
}

std::vector<LoadRing> read_load_rings(Child& load, const std::string& kind, const std::string& end,
                                      milliseconds timeout) {
    std::vector<LoadRing> rings;
    auto deadline = steady_clock::now() + timeout;
    while (steady_clock::now() < deadline) {
        auto line = load.read_line(duration_cast<milliseconds>(deadline - steady_clock::now()));
        if (!line) break;
        if (line->rfind(end, 0) == 0) return rings;
        if (auto r = parse_load_line(*line, kind)) rings.push_back(*r);
    }
    return {};
}

std::optional<std::string> bpf_prog_name(unsigned id) {
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) return std::nullopt;
    bpf_prog_info info{};
    __u32 len = sizeof info;
    const bool ok = bpf_obj_get_info_by_fd(fd, &info, &len) == 0;
    ::close(fd);
    return ok ? std::optional<std::string>(info.name) : std::nullopt;
}

int links_of(pid_t pid, const std::string& prefix) {
    int n = 0;
    std::error_code ec;
    const std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        std::ifstream f(e.path());
        bool link = false;
        unsigned prog = 0;
        for (std::string line; std::getline(f, line);) {
            if (line.rfind("link_type:", 0) == 0) link = true;
            if (line.rfind("prog_id:", 0) == 0) prog = std::stoul(line.substr(8));
        }
        if (!link || !prog) continue;
        const auto name = bpf_prog_name(prog);
        if (name && name->rfind(prefix, 0) == 0) ++n;
    }
    return n;
}

std::optional<unsigned long long> schedstat_ns(pid_t pid, pid_t tid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat");
    unsigned long long ns = 0;
    if (!(f >> ns)) return std::nullopt;
    return ns;
}

}  // namespace live
