// What the two doctor test files share (doctor_test.cpp, doctor_change_test.cpp).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace live::doctor {

// A 16 MiB file for O_DIRECT reads, gone with the object.
struct ReadFile {
    std::string path;
    ReadFile() {
        const char* tmp = std::getenv("TMPDIR");
        path = std::string(tmp && *tmp ? tmp : "/tmp") + "/iouscope-doctor-" +
               std::to_string(getpid());
        std::ofstream f(path, std::ios::binary);
        const std::string block(1 << 20, 'x');
        for (int i = 0; i < 16; ++i) f << block;
    }
    ~ReadFile() { std::filesystem::remove(path); }
};

}  // namespace live::doctor
