// What devdl and its translator helper (devdl-translate) say to each other over the helper's
// standard input and output. Each message is a header (its kind and its payload's bytes, both
// little-endian) and the payload:
//
//   devdl  -> helper   Request   the operation, its settings and the module's words
//   helper -> devdl    Layout    (SPIR with variables placed) the region the variables need
//   devdl  -> helper   Address   where the region is
//   helper -> devdl    Result    the bytes made (SPIR bitcode, or SPIR-V words), or
//                      Failure   the error's code and text: a refusal, said as devdl says it
//
// Whatever the helper writes is checked as it is read: a message of another kind, of a size
// past the bounds, or a payload that does not decode is "not the expected output".
#pragma once

#include "backend/spirv/place_variables.h"
#include "backend/spirv/spec_constant.h"
#include "support/error.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::backend::translator {

enum class Operation : uint32_t {
  Spir = 1,           // spirvToSpir
  OptimizeSpirv = 2,  // optimizeSpirv
  CopyKernels = 3,    // copyKernels
  BuildOpenCl = 4,    // the driver's binary of `modules` linked on the OpenCL device `device`
};

struct Request {
  Operation operation = Operation::Spir;
  bool optimize = false;        // Spir: load-time LTO
  bool placeVariables = false;  // Spir: the helper asks where the variables go (Layout, Address)
  std::vector<SpecConstant> specConstants;
  std::vector<std::string> variables;  // CopyKernels: those to copy
  std::vector<uint32_t> words;         // the module
  // BuildOpenCl: the identity of the device to build on (the helper opens its default device,
  // which must be that one), and the modules, each with its label for errors.
  std::string device;
  std::vector<std::pair<std::string, std::vector<uint32_t>>> modules;
};

enum class Message : uint32_t {
  Request = 0x52767464,  // "dtvR"
  Layout = 0x4c767464,
  Address = 0x41767464,
  Result = 0x53767464,
  Failure = 0x46767464,
};

/// A message's header, and the most bytes a payload may have.
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint64_t kMaxPayload = uint64_t(1) << 30;

struct Header {
  Message kind;
  uint64_t size;
};

/// The message: its header and `payload`.
std::string message(Message kind, std::string_view payload);

/// The header in `bytes` (kHeaderSize of them); fails where the kind is none of Message's or the
/// size is past kMaxPayload.
llvm::Expected<Header> readHeader(std::string_view bytes);

std::string encode(const Request &request);
llvm::Expected<Request> decodeRequest(std::string_view payload);

std::string encode(const VariableLayout &layout);
llvm::Expected<VariableLayout> decodeLayout(std::string_view payload);

std::string encodeAddress(uint64_t address);
llvm::Expected<uint64_t> decodeAddress(std::string_view payload);

/// A failure's code and text; an error that is no Failure travels as Unsupported.
std::string encodeFailure(llvm::Error err);
/// The failure the payload says: its code and text.
llvm::Expected<std::pair<ErrorCode, std::string>> decodeFailure(std::string_view payload);

}  // namespace devdl::backend::translator
