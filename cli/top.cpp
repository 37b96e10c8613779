// The interactive and batch front ends of `iouscope top`.
#include "cli/top.hpp"

#include <curses.h>
#include <langinfo.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <clocale>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <thread>

#include "cli/top_source.hpp"
#include "exporters/json_exporter.hpp"

namespace iouscope::top {

namespace {

std::atomic<bool> g_quit{false};
std::atomic<bool> g_curses_active{false};

void on_quit(int) {
    g_quit = true;
}

// A fatal signal must not leave the user's terminal in raw mode with no echo. endwin() is not
// async-signal-safe, but the process is about to die anyway and a restored terminal is worth
// the risk; the default action is then re-raised so the crash is still reported.
void on_fatal(int sig) {
    if (g_curses_active.exchange(false)) endwin();
    signal(sig, SIG_DFL);
    raise(sig);
}

// Owns curses mode; every way out of the interactive loop, including exceptions, ends it.
class CursesSession {
public:
    CursesSession() {
        initscr();
        g_curses_active = true;
        cbreak();
        noecho();
        keypad(stdscr, TRUE);
        curs_set(0);
        timeout(100);  // getch() returns every 100 ms so new snapshots are drawn promptly
        std::set_terminate([] {
            if (g_curses_active.exchange(false)) endwin();
            std::abort();
        });
    }
    ~CursesSession() {
        if (g_curses_active.exchange(false)) endwin();
    }
};

void install_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) signal(sig, on_fatal);
}

std::unique_ptr<SnapshotSource> open_source(const Options& o) {
    std::string daemon_err, local_err;
    if (!o.local) {
        if (auto s = connect_daemon(o.daemon_url, o.delay_seconds, daemon_err)) return s;
    }
    if (auto s = start_local(o.delay_seconds, local_err)) return s;
    if (o.local) {
        std::cerr << "iouscope top: cannot sample in-process: " << local_err << "\n";
    } else {
        std::cerr << "iouscope top: no iouscope daemon answered (" << daemon_err
                  << "),\nand sampling in-process failed: " << local_err
                  << "\nStart iouscoped, or run iouscope top as root.\n";
    }
    return nullptr;
}

// Waits for a snapshot newer than `seq`; nullptr on quit.
std::shared_ptr<const Snapshot> next_snapshot(SnapshotSource& src, std::uint64_t seq,
                                              double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    while (!g_quit) {
        auto s = src.latest();
        // A daemon restarted in the meantime counts again from 1: any change of seq is new.
        if (s && s->seq != seq && s->seq >= 2) return s;
        if (std::chrono::steady_clock::now() > deadline) return nullptr;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return nullptr;
}

int run_batch(const Options& o, SnapshotSource& src, ViewState v) {
    int width = o.width;
    if (width == 0) {
        const char* cols = std::getenv("COLUMNS");
        width = cols ? std::atoi(cols) : 0;
        if (width < 40) width = 160;
    }
    History h;
    std::uint64_t seq = 0;
    for (int i = 0; (o.iterations == 0 || i < o.iterations) && !g_quit; ++i) {
        auto s = next_snapshot(src, seq, o.delay_seconds * 3 + 5);
        if (!s) {
            if (g_quit) break;
            std::cerr << "iouscope top: no new snapshot: " << src.last_error() << "\n";
            return 1;
        }
        seq = s->seq;
        h.add(*s);
        if (o.json) {
            std::cout << snapshot_to_json(*s) << "\n";
        } else {
            for (auto& line : render(*s, v, h, width, 0, false)) {
                while (!line.empty() && line.back() == ' ') line.pop_back();
                std::cout << line << "\n";
            }
            std::cout << "\n";
        }
        std::cout.flush();
        // The next snapshot is not due before the delay has passed.
        if (o.iterations == 0 || i + 1 < o.iterations)
            std::this_thread::sleep_for(
                std::chrono::milliseconds(static_cast<long>(o.delay_seconds * 1000 * 0.9)));
    }
    return 0;
}

void draw(const std::vector<std::string>& lines, int selected_line) {
    erase();
    for (int y = 0; y < static_cast<int>(lines.size()) && y < LINES; ++y) {
        bool header = y == 3;
        bool sel = y == selected_line;
        if (header || sel) attron(A_REVERSE);
        mvaddnstr(y, 0, lines[static_cast<std::size_t>(y)].c_str(), -1);
        if (header || sel) attroff(A_REVERSE);
    }
    refresh();
}

void show(const std::shared_ptr<const Snapshot>& shown, ViewState& v, const History& h, bool utf8) {
    if (!shown) {
        erase();
        mvaddstr(0, 0, "iouscope top: waiting for the first snapshot...");
        refresh();
        return;
    }
    const auto screen = render_screen(*shown, v, h, COLS, LINES, utf8);
    // The list scrolls to follow the selection: the next frame starts where this one did.
    v.selected = screen.selected;
    v.first = screen.first;
    draw(screen.lines, v.view == View::threads ? screen.selected_line : -1);
}

// A key while the filter is being typed: Enter applies it, Escape drops it.
void edit_filter(ViewState& v, int ch) {
    if (ch == '\n' || ch == KEY_ENTER) {
        v.filter = v.editing_filter;
        v.editing = false;
    } else if (ch == 27) {
        v.editing = false;
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (!v.editing_filter.empty()) v.editing_filter.pop_back();
    } else if (ch >= 32 && ch < 127) {
        v.editing_filter += static_cast<char>(ch);
    }
}

// The sort column `step` places away (-1 or +1), over every column but the last (HISTORY).
Column next_sort(Column current, int step) {
    const auto& cols = thread_columns();
    const int n = static_cast<int>(cols.size()) - 1;
    int at = 0;
    for (std::size_t i = 0; i < cols.size(); ++i)
        if (cols[i].id == current) at = static_cast<int>(i);
    return cols[static_cast<std::size_t>(((at + step) % n + n) % n)].id;
}

void toggle_expanded(ViewState& v, const std::vector<const ThreadSnapshot*>& rows) {
    if (v.selected >= static_cast<int>(rows.size())) return;
    auto tid = rows[static_cast<std::size_t>(v.selected)]->tid;
    if (!v.expanded.erase(tid)) v.expanded.insert(tid);
}

void set_refresh(ViewState& v, SnapshotSource& src, double seconds) {
    v.refresh_seconds = std::clamp(seconds, 0.125, 60.0);
    src.set_interval(v.refresh_seconds);
}

// Applies a key outside filter editing; false for a key that means nothing (no redraw).
bool apply_key(int ch, ViewState& v, const std::vector<const ThreadSnapshot*>& rows,
               SnapshotSource& src) {
    switch (ch) {
        case 'q':
        case 'Q':
            g_quit = true;
            return true;
        case '\t':
            v.view = v.view == View::threads   ? View::polling
                     : v.view == View::polling ? View::requests
                                               : View::threads;
            return true;
        case '\n':
        case KEY_ENTER:
        case 'e':
            toggle_expanded(v, rows);
            return true;
        case KEY_UP:
        case 'k':
            v.selected = std::max(0, v.selected - 1);
            return true;
        case KEY_DOWN:
        case 'j':
            ++v.selected;
            return true;
        case KEY_PPAGE:
        case KEY_NPAGE:
            // A page: the screen's height less the header, titles and status line.
            v.selected =
                std::max(0, v.selected + (ch == KEY_NPAGE ? 1 : -1) * std::max(1, LINES - 6));
            return true;
        case KEY_HOME:
            v.selected = 0;
            return true;
        case KEY_END:
            v.selected = std::max(0, static_cast<int>(rows.size()) - 1);
            return true;
        case '<':
        case '>':
            v.sort = next_sort(v.sort, ch == '<' ? -1 : 1);
            return true;
        case 'r':
            v.descending = !v.descending;
            return true;
        case '/':
            v.editing = true;
            v.editing_filter = v.filter;
            return true;
        case 'p':
        case ' ':
            v.paused = !v.paused;
            return true;
        case '+':
        case '-':
            set_refresh(v, src, ch == '+' ? v.refresh_seconds * 2 : v.refresh_seconds / 2);
            return true;
        case 'h':
        case '?':
            v.help = !v.help;
            return true;
        case KEY_RESIZE:
            return true;
        default:
            return false;
    }
}

int run_interactive(SnapshotSource& src, ViewState v) {
    const char* codeset = nl_langinfo(CODESET);
    const bool utf8 = codeset && std::strcmp(codeset, "UTF-8") == 0;
    CursesSession curses;
    History h;
    std::shared_ptr<const Snapshot> shown;
    bool dirty = true;
    while (!g_quit) {
        if (!v.paused) {
            auto s = src.latest();
            if (s && (!shown || s->seq != shown->seq)) {
                shown = s;
                h.add(*s);
                dirty = true;
            }
        }
        if (dirty) show(shown, v, h, utf8);
        // Without a snapshot the waiting line stays up and is redrawn after every key.
        dirty = !shown;
        const int ch = getch();
        if (ch == ERR) continue;
        if (v.editing) {
            edit_filter(v, ch);
            dirty = true;
            continue;
        }
        auto rows = shown ? visible_threads(*shown, v) : std::vector<const ThreadSnapshot*>{};
        dirty = apply_key(ch, v, rows, src) || dirty;
    }
    return 0;
}

}  // namespace

int run(const Options& o) {
    std::setlocale(LC_ALL, "");
    install_signals();
    // The in-process collector logs through spdlog: to stderr and errors only in batch mode, and
    // not at all on the full screen, where any stray line would tear the display.
    spdlog::set_default_logger(spdlog::stderr_color_mt("iouscope"));
    spdlog::set_level(o.batch ? spdlog::level::err : spdlog::level::off);
    auto src = open_source(o);
    if (!src) return 1;
    ViewState v;
    v.sort = o.sort;
    v.view = o.view;
    v.filter = o.filter;
    v.refresh_seconds = o.delay_seconds;
    v.source = src->description();
    v.ring_limit = o.rings_per_thread;
    if (o.batch) {
        v.expand_all = true;
        v.limit = o.limit < 0 ? kBatchLimit : o.limit;
        return run_batch(o, *src, v);
    }
    v.limit = std::max(o.limit, 0);
    if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
        std::cerr << "iouscope top: not a terminal; use -b for batch output\n";
        return 2;
    }
    return run_interactive(*src, v);
}

}  // namespace iouscope::top
