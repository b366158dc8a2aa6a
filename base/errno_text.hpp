// errno_text(): what the C library says an errno value means ("No such file or directory"),
// for the messages of code that calls the system (dist/'s stores and sockets, state_dict
// files). One definition, so that every such message reads the same.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

namespace ddp {

// The default is the errno of the moment errno_text() is called: call it right after the
// call that failed, before anything else can change errno.
inline std::string errno_text(int error = errno) { return std::strerror(error); }

}  // namespace ddp
