// Reading a whole text file: one place for the agent, the CLI and tests.
#pragma once

#include <optional>
#include <string>

namespace shoal {

// The file's bytes, or nullopt when it cannot be opened or read. Callers
// word the error: what the file was for decides the message and the code.
std::optional<std::string> read_text_file(const std::string& path);

}  // namespace shoal
