// The two ways the load tests look at a ParseResult: its value (a failure if it is an error)
// or its error message ("<no error>" if it parsed).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "load/ring_spec.hpp"

namespace iouscope::load::test {

template <typename T>
const T& ok(const ParseResult<T>& r) {
    if (auto* e = std::get_if<ParseError>(&r)) ADD_FAILURE() << e->message;
    return std::get<T>(r);
}

template <typename T>
std::string err(const ParseResult<T>& r) {
    auto* e = std::get_if<ParseError>(&r);
    return e ? e->message : std::string("<no error>");
}

}  // namespace iouscope::load::test
