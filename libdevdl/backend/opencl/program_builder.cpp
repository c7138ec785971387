// Programs built on an OpenCL device (ProgramBuilder): from one SPIR-V module as IL, from SPIR,
// from a binary (a native object, a stored program); and the binary a linked program is stored
// as, and loaded from, in the disk cache.
#include "backend/opencl/program_builder.h"
#include "backend/opencl/kept_regions.h"
#include "backend/opencl/opencl_info.h"
#include "backend/packed_parts.h"

#include "support/debug.h"
#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace devdl::backend::opencl {

namespace {

/// The program's binary for `device` (CL_PROGRAM_BINARIES holds one per device of the program).
llvm::Expected<std::string> programBinary(const Api &api, cl_program program, cl_device_id device) {
  cl_uint count = 0;
  cl_int err = api.clGetProgramInfo(program, CL_PROGRAM_NUM_DEVICES, sizeof count, &count, nullptr);
  if (err != CL_SUCCESS) return clFailure("clGetProgramInfo (CL_PROGRAM_NUM_DEVICES)", err);
  std::vector<cl_device_id> devices(count);
  std::vector<size_t> sizes(count);
  if ((err = api.clGetProgramInfo(program, CL_PROGRAM_DEVICES, count * sizeof(cl_device_id), devices.data(), nullptr)) !=
          CL_SUCCESS ||
      (err = api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, count * sizeof(size_t), sizes.data(), nullptr)) !=
          CL_SUCCESS)
    return clFailure("clGetProgramInfo (CL_PROGRAM_BINARY_SIZES)", err);
  const auto index = static_cast<size_t>(std::find(devices.begin(), devices.end(), device) - devices.begin());
  if (index == count || sizes[index] == 0) return fail(ErrorCode::Unsupported, "the program has no binary for the device");
  std::vector<std::string> binaries(count);
  std::vector<unsigned char *> pointers(count, nullptr);
  binaries[index].resize(sizes[index]);
  pointers[index] = reinterpret_cast<unsigned char *>(binaries[index].data());
  if ((err = api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, count * sizeof(unsigned char *), pointers.data(),
                                  nullptr)) != CL_SUCCESS)
    return clFailure("clGetProgramInfo (CL_PROGRAM_BINARIES)", err);
  return std::move(binaries[index]);
}

}  // namespace

llvm::Expected<std::string> ProgramBuilder::driverBinary(const Program &program) const {
  if (device_.binaryKernelNameBound != SIZE_MAX) {
    size_t size = 0;
    std::string names;
    if (device_.api.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size) == CL_SUCCESS) {
      names.resize(size);
      device_.api.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr);
    }
    for (llvm::StringRef name : llvm::split(llvm::StringRef(names.c_str()), ';'))
      if (name.size() > device_.binaryKernelNameBound)
        return fail(ErrorCode::Unsupported,
                    "the driver makes a program's binary in a directory named after each kernel, and kernel `" +
                        name.str() + "` is " + std::to_string(name.size()) +
                        " bytes, longer than a file name may be");
  }
  return programBinary(device_.api, program.get(), device_.id);
}

std::string ProgramBuilder::binaryOf(const backend::Program &program, std::string_view spir) const {
  auto notStored = [&](const std::string &why) {
    if (Debug::get().on(Debug::Statistics)) Debug::get().print("program not stored on " + device_.name + ": " + why);
    return std::string();
  };
  if (const auto *parted = dynamic_cast<const ProgramOfParts *>(&program)) {
    std::vector<PartBinary> parts;
    for (size_t i = 0; i < parted->parts().size(); ++i) {
      auto bytes = driverBinary(*parted->parts()[i]);
      if (!bytes) return notStored("part " + std::to_string(i) + ": " + llvm::toString(bytes.takeError()));
      parts.push_back({std::move(*bytes), parted->names()[i]});
    }
    return storedProgram(nullptr, packParts(kPackedPrograms, parts));
  }
  const auto &one = static_cast<const Program &>(program);
  // A device that compiles each kernel at its first launch compiles them all for its binary: a
  // program of many is stored as the SPIR it was built from, as is one the driver has no binary of.
  const bool spirStored = !spir.empty() && device_.placesVariables();
  auto asSpir = [&](const std::string &why) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program stored on " + device_.name + " as SPIR: " + why);
    return storedProgram(one.hostVariables(), std::string(kStoredSpir) + std::string(spir));
  };
  size_t kernels = 0;
  if (spirStored &&
      device_.api.clGetProgramInfo(one.get(), CL_PROGRAM_NUM_KERNELS, sizeof kernels, &kernels, nullptr) ==
          CL_SUCCESS &&
      kernels > kKernelsForDriverBinary)
    return asSpir(std::to_string(kernels) + " kernels, which the driver would compile every one of for its binary");
  auto bytes = driverBinary(one);
  if (!bytes) return spirStored ? asSpir(llvm::toString(bytes.takeError())) : notStored(llvm::toString(bytes.takeError()));
  return storedProgram(one.hostVariables(), *bytes);
}

llvm::Expected<std::unique_ptr<backend::Program>> ProgramBuilder::load(std::string_view binary) const {
  auto stored = readStoredProgram(binary);
  if (!stored) return stored.takeError();
  // Its variables where its kernels were built to find them, mapped before the driver builds it.
  // Where a program still there holds that address (an instance of the same program the driver
  // has not let go, another context's), this process cannot take the entry now (ErrorCode::Busy).
  std::unique_ptr<HostVariables> variables;
  if (stored->variables) {
    sweepKept(device_.api);
    auto &[address, layout] = *stored->variables;
    auto region = HostVariables::at(std::move(layout), address);
    if (!region) return region.takeError();
    variables = std::move(*region);
  }
  if (isPackedParts(kPackedPrograms, stored->driverBinary)) return loadParts(stored->driverBinary);
  auto program = stored->driverBinary.starts_with(kStoredSpir)
                     ? buildSpir(stored->driverBinary.substr(kStoredSpir.size()))
                     : buildBinary(stored->driverBinary, device_.options, "a cached program");
  if (!program) return program.takeError();
  (*program)->holdVariables(std::move(variables));
  return std::unique_ptr<backend::Program>(std::move(*program));
}

llvm::Expected<std::unique_ptr<backend::Program>> ProgramBuilder::loadParts(std::string_view packed) const {
  auto parts = unpackParts(kPackedPrograms, packed, "OpenCL programs");
  if (!parts) return parts.takeError();
  std::vector<std::unique_ptr<Program>> programs;
  std::vector<std::vector<std::string>> names;
  for (PartBinary &part : *parts) {
    auto program =
        buildBinary(part.binary, device_.options, "a cached program's part " + std::to_string(programs.size()));
    if (!program) return program.takeError();
    programs.push_back(std::move(*program));
    names.push_back(std::move(part.names));
  }
  return std::make_unique<ProgramOfParts>(std::move(programs), std::move(names));
}

std::unique_ptr<Program> ProgramBuilder::own(cl_program program) const {
  return std::make_unique<Program>(device_.api, program, device_.name, device_.id, device_.pointers);
}

llvm::Expected<std::unique_ptr<Program>> ProgramBuilder::fromBinary(Bytes binary) const {
  const auto *bytes = binary.data();
  const size_t size = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program =
      device_.api.clCreateProgramWithBinary(device_.context, 1, &device_.id, &size, &bytes, &status, &err);
  if (err == CL_SUCCESS && status != CL_SUCCESS) err = status;
  if (err != CL_SUCCESS) {
    if (program) device_.api.clReleaseProgram(program);
    return clFailure("clCreateProgramWithBinary", err);
  }
  return own(program);
}

llvm::Expected<std::unique_ptr<Program>> ProgramBuilder::nativeObject(Bytes binary) const {
  // Whether a binary is this device's is the driver's to say.
  std::string refused = !device_.caps.linker ? "it has no linker (CL_DEVICE_LINKER_AVAILABLE)" : "";
  if (refused.empty()) {
    auto object = fromBinary(binary);
    if (object) return object;
    refused = llvm::toString(object.takeError());
  }
  return fail(ErrorCode::Unsupported,
              "OpenCL device " + device_.name + " does not take this native binary: " + refused);
}

llvm::Expected<std::unique_ptr<Program>> ProgramBuilder::buildBinary(std::string_view binary,
                                                                     const std::string &options,
                                                                     std::string_view what) const {
  auto owned = fromBinary(asBytes(binary));
  if (!owned) return fail(ErrorCode::Unsupported, llvm::toString(owned.takeError()) + " (" + std::string(what) + ")");
  cl_program program = (*owned)->get();
  cl_int err = CL_SUCCESS;
  if ((err = device_.api.clBuildProgram(program, 1, &device_.id, options.c_str(), nullptr, nullptr)) != CL_SUCCESS) {
    const std::string log = buildLog(device_.api, program, device_.id);
    return fail(ErrorCode::Unsupported, "clBuildProgram on " + device_.name + " failed: " + errorName(err) + " (" +
                                            std::string(what) + ")" + (log.empty() ? "" : "\n" + log));
  }
  return std::move(*owned);
}

llvm::Error ProgramBuilder::specialize(cl_program program, const SpecConstants &specs) const {
  if (specs.empty()) return llvm::Error::success();
  if (!device_.api.clSetProgramSpecializationConstant)
    return fail(ErrorCode::Unsupported, "the OpenCL ICD loader has no clSetProgramSpecializationConstant (OpenCL 2.2)");
  for (const auto &[id, value] : specs)
    if (cl_int err = device_.api.clSetProgramSpecializationConstant(program, id, value.size(), value.data());
        err != CL_SUCCESS)
      return clFailure(("clSetProgramSpecializationConstant (SpecId " + std::to_string(id) + ")").c_str(), err);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Program>> ProgramBuilder::buildIl(std::span<const uint32_t> words,
                                                                 const SpecConstants &specs) const {
  cl_int err = CL_SUCCESS;
  cl_program program =
      device_.api.clCreateProgramWithIL(device_.context, words.data(), words.size() * sizeof(uint32_t), &err);
  if (err != CL_SUCCESS) return clFailure("clCreateProgramWithIL", err);
  auto owned = own(program);
  if (llvm::Error e = specialize(program, specs)) return e;
  err = device_.api.clBuildProgram(program, 1, &device_.id, device_.options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log = buildLog(device_.api, program, device_.id);
    return fail(ErrorCode::Unsupported, "clBuildProgram (SPIR-V) on " + device_.name + " failed: " + errorName(err) +
                                            (log.empty() ? "" : "\n" + log));
  }
  return owned;
}

llvm::Expected<std::unique_ptr<Program>> ProgramBuilder::buildSpir(std::string_view bitcode,
                                                                   std::string_view options) const {
  if (!device_.caps.spir)
    return fail(ErrorCode::Unsupported, "device " + device_.name + " does not take SPIR (no cl_khr_spir)");
  std::string buildOptions = "-x spir -spir-std=1.2";
  for (std::string_view more : {std::string_view(device_.options), options})
    // Appended in two steps: " " + std::string(more) here made GCC 12 warn of an overlapping
    // copy that cannot happen (-Wrestrict, at -O3).
    if (!more.empty()) buildOptions.append(" ").append(more);
  return buildBinary(bitcode, buildOptions, "SPIR");
}

}  // namespace devdl::backend::opencl
