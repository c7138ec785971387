#include "support/error.h"

namespace devdl {

char Failure::ID = 0;

void Failure::log(llvm::raw_ostream &os) const {
  if (!file_.empty()) os << file_ << ": ";
  if (!image_.empty()) os << image_ << ": ";
  os << message_;
}

std::error_code Failure::convertToErrorCode() const {
  return std::make_error_code(code_ == ErrorCode::NotFound ? std::errc::no_such_file_or_directory
                                                           : std::errc::invalid_argument);
}

llvm::Error fail(ErrorCode code, const llvm::Twine &message) {
  return llvm::make_error<Failure>(code, message.str());
}

bool hasCode(llvm::Error &err, ErrorCode code) {
  bool found = false;
  err = llvm::handleErrors(std::move(err), [&](std::unique_ptr<Failure> f) -> llvm::Error {
    found |= f->code() == code;
    return llvm::Error(std::move(f));
  });
  return found;
}

namespace {

template <typename Setter>
llvm::Error addContext(llvm::Error err, Setter set) {
  llvm::Error out = llvm::Error::success();
  llvm::handleAllErrors(
      std::move(err),
      [&](std::unique_ptr<Failure> f) {
        set(*f);
        out = llvm::joinErrors(std::move(out), llvm::Error(std::move(f)));
      },
      [&](const llvm::ErrorInfoBase &other) {
        auto f = std::make_unique<Failure>(ErrorCode::BadFormat, other.message());
        set(*f);
        out = llvm::joinErrors(std::move(out), llvm::Error(std::move(f)));
      });
  return out;
}

}  // namespace

llvm::Error inFile(llvm::Error err, std::string_view file) {
  if (!err) return err;
  return addContext(std::move(err), [&](Failure &f) {
    if (f.file().empty()) f.setFile(std::string(file));
  });
}

llvm::Error inImage(llvm::Error err, std::string_view image) {
  if (!err) return err;
  return addContext(std::move(err), [&](Failure &f) {
    if (f.image().empty()) f.setImage(std::string(image));
  });
}

llvm::Error KeptError::keep(llvm::Error err, KeptError &into) {
  into.failures_.clear();
  return llvm::handleErrors(
      std::move(err),
      [&](std::unique_ptr<Failure> f) -> llvm::Error {
        into.failures_.push_back(*f);
        return llvm::Error(std::move(f));
      },
      [&](std::unique_ptr<llvm::ErrorInfoBase> other) -> llvm::Error {
        into.failures_.emplace_back(ErrorCode::BadFormat, other->message());
        return llvm::Error(std::move(other));
      });
}

llvm::Error KeptError::make() const {
  llvm::Error out = llvm::Error::success();
  for (const Failure &f : failures_) out = llvm::joinErrors(std::move(out), llvm::make_error<Failure>(f));
  return out;
}

}  // namespace devdl
