// The command line of iouscope-load (load/command_line.hpp): what CLI11 accepts, which options
// count as given, and that --help wins over everything else.
#include "load/command_line.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace iouscope::load;

namespace {

CommandLine parse(std::vector<const char*> args) {
    args.insert(args.begin(), kProg);
    return parse_command_line(static_cast<int>(args.size()), args.data());
}

std::string error_of(const CommandLine& line) {
    auto* e = std::get_if<ParseError>(&line);
    return e ? e->message : std::string("<no error>");
}

}  // namespace

TEST(LoadCommandLine, KeepsOptionsAsGivenAndUnsetOnesEmpty) {
    const auto line = parse({"--ring", "plain", "--ring", "sqpoll,count=5", "--duration", "1s",
                             "--hold", "inf", "--json"});
    ASSERT_TRUE(std::holds_alternative<RawOptions>(line)) << error_of(line);
    const auto& raw = std::get<RawOptions>(line);
    EXPECT_EQ(raw.rings, (std::vector<std::string>{"plain", "sqpoll,count=5"}));
    EXPECT_EQ(raw.duration, std::optional<std::string>("1s"));
    EXPECT_EQ(raw.hold, std::optional<std::string>("inf"));
    EXPECT_TRUE(raw.json);
    EXPECT_FALSE(raw.op.has_value());
    EXPECT_FALSE(raw.file.has_value());
    EXPECT_FALSE(raw.cycles.has_value());
    // Given but empty is not the same as not given: build_config() rejects an empty --file.
    const auto empty = parse({"--ring", "plain", "--file", ""});
    ASSERT_TRUE(std::holds_alternative<RawOptions>(empty)) << error_of(empty);
    EXPECT_EQ(std::get<RawOptions>(empty).file, std::optional<std::string>(""));
}

TEST(LoadCommandLine, HelpWinsOverAnyOtherArgument) {
    EXPECT_TRUE(std::holds_alternative<HelpRequest>(parse({"--help"})));
    EXPECT_TRUE(std::holds_alternative<HelpRequest>(parse({"--bogus", "-h"})));
    EXPECT_TRUE(std::holds_alternative<HelpRequest>(parse({"--ring", "--help"})));
    EXPECT_NE(std::string(help_text()).find("--ring SPEC"), std::string::npos);
    EXPECT_NE(std::string(help_text()).find("EXIT STATUS"), std::string::npos);
}

TEST(LoadCommandLine, RejectsWhatCli11Rejects) {
    EXPECT_NE(error_of(parse({"--bogus"})).find("--bogus"), std::string::npos);
    EXPECT_NE(error_of(parse({"--ring"})), "<no error>");
    EXPECT_NE(error_of(parse({"--ring", "plain", "--duration", "1s", "--duration", "2s"})),
              "<no error>");
    EXPECT_NE(error_of(parse({"--ring", "plain", "stray"})).find("stray"), std::string::npos);
}

TEST(LoadCommandLine, HelpDocumentsThePerRingKeysAndTheirReportKeys) {
    const std::string help = help_text();
    for (const char* key : {"op=OP", "async ", "overflow=K", "stuck=N", "blocked=N",
                            "op=nop async=0 stuck=0 blocked=0", "overflowed=0 enobufs=0",
                            "\"async\":false", "\"overflowed\":0,\"enobufs\":0"}) {
        EXPECT_NE(help.find(key), std::string::npos) << key;
    }
}
