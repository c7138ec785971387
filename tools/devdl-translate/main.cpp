// devdl-translate: the SPIRV-LLVM-Translator's work for libdevdl, in a process of its own
// (backend/spirv/translator_process.h), so that a module the translator ends its process on ends
// only this one; and the OpenCL builds of a program's parts, which a driver that builds one
// program at a time in a process (Intel's) runs side by side only in processes of their own.
// libdevdl starts it; it reads requests from its standard input, one after another, and writes
// the messages of backend/spirv/translator_protocol.h to its standard output, until libdevdl
// closes the channel (or its process ends). Not a command for people: it is installed beside the
// library (devdl/libexec/), not on the PATH.
#include "backend/opencl/opencl_device.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_protocol.h"
#include "support/error.h"

#include <cerrno>
#include <cstdio>
#include <deque>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace {

using namespace devdl::backend::translator;

// The channel to libdevdl: standard input and output are one socket. It moves to a descriptor of
// its own, and standard output goes to standard error, so that nothing the libraries print can
// be taken for a message.
int channel = -1;

bool readAll(std::string &bytes, size_t size) {
  bytes.resize(size);
  for (size_t have = 0; have < size;) {
    const ssize_t got = read(channel, bytes.data() + have, size - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    have += got;
  }
  return true;
}

bool writeAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t put = write(channel, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    bytes.remove_prefix(put);
  }
  return true;
}

// The next message, of `kind`; an error where libdevdl sent another or closed the channel, and
// nothing at all (no error) where it closed the channel between messages.
llvm::Expected<std::string> receive(Message kind, bool *closed = nullptr) {
  std::string header, payload;
  if (!readAll(header, kHeaderSize)) {
    if (!closed) return devdl::fail(devdl::ErrorCode::Io, "libdevdl closed the channel");
    *closed = true;
    return std::string();
  }
  auto read = readHeader(header);
  if (!read) return read.takeError();
  if (read->kind != kind) return devdl::fail(devdl::ErrorCode::BadFormat, "libdevdl sent a message out of turn");
  if (!readAll(payload, read->size)) return devdl::fail(devdl::ErrorCode::Io, "libdevdl closed the channel");
  return payload;
}

std::string wordsAsBytes(const std::vector<uint32_t> &words) {
  return std::string(reinterpret_cast<const char *>(words.data()), words.size() * 4);
}

// The driver's binary of the request's modules compiled and linked on this process's default
// OpenCL device (opened at the first build, kept for the next), which must be the one libdevdl
// links for: the same identity.
llvm::Expected<std::string> buildOpenCl(const Request &request) {
  using devdl::backend::opencl::Device;
  static Device *device = nullptr;  // never destroyed: the driver's own teardown is the process's end
  if (!device) {
    auto opened = Device::openDefault();
    if (!opened) return opened.takeError();
    device = opened->release();
  }
  if (device->identity() != request.device)
    return devdl::fail(devdl::ErrorCode::Unsupported,
                       "the helper's default OpenCL device is " + device->name() + ", not the device linking");
  std::deque<devdl::DeviceImage> images;
  std::vector<devdl::backend::LinkInput> inputs;
  for (const auto &[label, words] : request.modules) {
    devdl::DeviceImage &image = images.emplace_back();
    image.format = devdl::ImageFormat::SpirV;
    image.bytes = devdl::Bytes(reinterpret_cast<const uint8_t *>(words.data()), words.size() * 4);
    inputs.push_back({&image, label});
  }
  auto program = device->linkObjects(inputs);
  if (!program) return program.takeError();
  return device->driverBinary(**program);
}

// What the request asks, done here.
llvm::Expected<std::string> serve(const Request &request) {
  switch (request.operation) {
    case Operation::Spir: {
      auto place = [](const devdl::backend::VariableLayout &layout) -> llvm::Expected<uint64_t> {
        if (!writeAll(message(Message::Layout, encode(layout))))
          return devdl::fail(devdl::ErrorCode::Io, "libdevdl closed the channel");
        auto address = receive(Message::Address);
        if (!address) return address.takeError();
        return decodeAddress(*address);
      };
      return devdl::backend::inProcess::spirvToSpir(
          request.words, request.specConstants, request.optimize,
          request.placeVariables ? devdl::backend::PlaceVariables(place) : devdl::backend::PlaceVariables(nullptr));
    }
    case Operation::OptimizeSpirv: {
      auto words = devdl::backend::inProcess::optimizeSpirv(request.words, request.specConstants);
      if (!words) return words.takeError();
      return wordsAsBytes(*words);
    }
    case Operation::CopyKernels: {
      auto words = devdl::backend::inProcess::copyKernels(request.words, request.variables);
      if (!words) return words.takeError();
      return wordsAsBytes(*words);
    }
    case Operation::BuildOpenCl:
      return buildOpenCl(request);
  }
  return devdl::fail(devdl::ErrorCode::InvalidArgument, "no such operation");
}

}  // namespace

int main() {
  channel = fcntl(0, F_DUPFD_CLOEXEC, 3);
  const int nothing = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (channel < 0 || nothing < 0 || dup2(nothing, 0) < 0 || dup2(2, 1) < 0) {
    std::perror("devdl-translate: its channel to libdevdl");
    return 2;
  }
  for (;;) {
    bool closed = false;
    auto payload = receive(Message::Request, &closed);
    if (closed) return 0;  // libdevdl is done with it
    auto request = payload ? decodeRequest(*payload) : llvm::Expected<Request>(payload.takeError());
    if (!request) {
      std::fprintf(stderr, "devdl-translate: %s\n", llvm::toString(request.takeError()).c_str());
      return 2;
    }
    auto made = serve(*request);
    const bool written = made ? writeAll(message(Message::Result, *made))
                              : writeAll(message(Message::Failure, encodeFailure(made.takeError())));
    if (!written) return 2;
  }
}
