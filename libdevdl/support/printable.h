// Text from files shown on a terminal or in a log: names come from images, and a control
// character in one (\r, an escape sequence) would forge or hide lines. One escaping for every
// message devdl writes (device_dlerror, devdl-nm).
#pragma once

#include <string>
#include <string_view>

namespace devdl {

/// `text` with backslashes and control characters, C1 ones (U+0080 to U+009F) and bytes of
/// malformed UTF-8 among them, written as escapes (`\\`, `\r`, `\x1b`); newlines too, unless
/// `keepNewlines` (a message of several lines, such as the SPIR-V validator's).
std::string printable(std::string_view text, bool keepNewlines = false);

}  // namespace devdl
