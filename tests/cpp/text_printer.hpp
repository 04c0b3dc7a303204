// How GoogleTest prints a host::Text in a failed expectation (found by argument-dependent lookup).
#pragma once

#include <mllm_kernel/text.hpp>

#include <ostream>

namespace mllm_kernel::host {
inline void PrintTo(const Text& text, std::ostream* os) { *os << '"' << text.c_str() << '"'; }
}  // namespace mllm_kernel::host
