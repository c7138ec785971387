// One error type for the whole library: a code, a message, and where it happened (file, image,
// symbol). Fallible functions return llvm::Error / llvm::Expected<T> carrying a devdl::Failure;
// only the API and tool boundaries turn it into text.
#pragma once

#include <llvm/Support/Error.h>

#include <string>
#include <vector>
#include <string_view>

namespace devdl {

enum class ErrorCode {
  NotFound,     // a file, image or symbol that is not there
  BadFormat,    // input that is truncated, corrupt or not what it claims to be
  Unsupported,  // a valid input devdl cannot handle (yet)
  Unresolved,   // an import with no definition in scope
  Io,           // the operating system refused a read or write
  InvalidArgument,
  Busy,         // valid, but what it needs is in use in this process now (an address taken)
};

/// A failure with the context needed to act on it: "file: image 2 (spirv): message".
class Failure : public llvm::ErrorInfo<Failure> {
 public:
  static char ID;

  Failure(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string &file() const { return file_; }
  const std::string &image() const { return image_; }
  const std::string &reason() const { return message_; }

  void setFile(std::string file) { file_ = std::move(file); }
  void setImage(std::string image) { image_ = std::move(image); }

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;

 private:
  ErrorCode code_;
  std::string file_;
  std::string image_;
  std::string message_;
};

/// Makes a Failure error.
llvm::Error fail(ErrorCode code, const llvm::Twine &message);

/// Whether any Failure in `err` (one, or several joined) has `code`; `err` holds the same errors
/// after.
bool hasCode(llvm::Error &err, ErrorCode code);

/// Adds the file name to every Failure in `err` that has none yet; other LLVM errors become
/// BadFormat failures with their text, so callers see one error type.
llvm::Error inFile(llvm::Error err, std::string_view file);

/// Adds an image label ("image 2 (spirv)") to every Failure in `err` that has none yet.
llvm::Error inImage(llvm::Error err, std::string_view image);

/// An error kept to be given again as it was (a build that failed, remembered).
class KeptError {
 public:
  /// Copies `err`'s failures (other LLVM errors as BadFormat ones) into a KeptError, and gives
  /// `err` back unchanged.
  static llvm::Error keep(llvm::Error err, KeptError &into);
  /// The failures kept, as they were.
  llvm::Error make() const;

 private:
  std::vector<Failure> failures_;
};

}  // namespace devdl
