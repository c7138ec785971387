// Like the seed's urDeviceSelectBinary check: an image the device cannot take (a cubin on OpenCL,
// a cubin for another GPU generation, one needing an aspect the device lacks) never satisfies an
// import, whatever its names.
#include "loader/candidacies.h"

#include "image/aspects.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

Acceptance Candidacies::on(llvm::Expected<backend::Device *> device, const DeviceImage &image) {
  if (!device) return {Candidacy::Refused, llvm::toString(device.takeError())};
  if (llvm::Error refused = (*device)->accepts(image)) return {Candidacy::Refused, llvm::toString(std::move(refused))};
  // Optional kernel features: an image needing an aspect the device lacks is no candidate.
  auto aspects = requiredAspects(image);
  if (!aspects) return {Candidacy::Refused, llvm::toString(aspects.takeError())};
  for (uint32_t aspect : *aspects)
    if (!(*device)->hasAspect(aspect))
      return {Candidacy::Refused, "it needs " + aspectWords(aspect) + ", which " + (*device)->description() + " lacks"};
  return {Candidacy::Taken, ""};
}

NewImage Candidacies::accept(DeviceImage image, bool mayOpenDevice) {
  if (!mayOpenDevice && !devices_.opensNothingFor(image)) return {std::move(image), {}};
  Acceptance acceptance = on(devices_.forImage(image), image);
  return {std::move(image), std::move(acceptance)};
}

void Candidacies::arrived(uint32_t id, Acceptance acceptance) {
  images_[id].acceptance = std::move(acceptance);
  if (undecided(id)) undecided_.push_back(id);
}

void Candidacies::undecideAll() {
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded) {
      images_[id].elsewhere.clear();  // some were as on the default device
      arrived(id, {});
    }
}

void Candidacies::decide(LoaderLock &lock) {
  // One arriving meanwhile is no candidate until decided.
  llvm::erase_if(undecided_, [&](uint32_t id) { return !images_.contains(id) || !images_[id].loaded || !undecided(id); });
  if (undecided_.empty()) return;
  const std::vector<uint32_t> ids = std::move(undecided_);
  undecided_.clear();
  decideWithMutexLetGo(
      lock, ids, [&](const DeviceImage &image) { return on(devices_.forImage(image), image); },
      [](LoadedImage &image, Acceptance decided) {
        if (image.acceptance.candidacy == Candidacy::Undecided) image.acceptance = std::move(decided);
      });
}

void Candidacies::decide(LoaderLock &lock, unsigned place) {
  decide(lock);
  if (place == 0) return;
  // Those its device's backend does not link are as on their default devices; the others are
  // asked of its device, with the mutex let go.
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < images_.end(); ++id) {
    if (!images_.contains(id) || !images_[id].loaded || images_[id].candidacyAt(place) != Candidacy::Undecided) continue;
    LoadedImage &image = images_[id];
    if (image.elsewhere.size() < place) image.elsewhere.resize(place);
    if (places_.placeFor(image.image, place) == 0) {
      if (image.acceptance.candidacy != Candidacy::Undecided) image.elsewhere[place - 1] = image.acceptance;
      continue;
    }
    ids.push_back(id);
  }
  if (ids.empty()) return;
  backend::Device *device = places_[place];
  decideWithMutexLetGo(
      lock, ids, [&](const DeviceImage &image) { return on(device, image); },
      [&](LoadedImage &image, Acceptance decided) {
        if (image.elsewhere.size() >= place && image.elsewhere[place - 1].candidacy == Candidacy::Undecided)
          image.elsewhere[place - 1] = std::move(decided);
      });
}

void Candidacies::decideWithMutexLetGo(LoaderLock &lock, const std::vector<uint32_t> &ids,
                                       llvm::function_ref<Acceptance(const DeviceImage &)> ask,
                                       llvm::function_ref<void(LoadedImage &, Acceptance)> keep) {
  for (uint32_t id : ids) images_.hold(id);  // they stay while the mutex is let go
  const auto hosts = images_.hostsOf(ids, nullptr);
  std::vector<Acceptance> decided;
  lock.letGo();
  auto references = host::referenceAll(hosts);  // the driver reads a native binary's bytes
  for (uint32_t id : ids) decided.push_back(ask(images_[id].image));  // held, never changed once added
  lock.takeAgain();
  for (size_t i = 0; i < ids.size(); ++i) {
    LoadedImage &image = images_[ids[i]];
    if (image.loaded) keep(image, std::move(decided[i]));
    images_.unhold(ids[i]);
  }
  lock.mutex().destroyLater(references);
  Generation::move();
}

}  // namespace devdl
