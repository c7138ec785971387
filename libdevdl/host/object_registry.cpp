#include "host/object_registry.h"

#include "host/loaded_bundles.h"

#include <link.h>

#include <algorithm>
#include <cstring>

namespace devdl::host {

namespace {

const char *copyInto(llvm::BumpPtrAllocator &arena, const char *s) {
  const size_t n = std::strlen(s) + 1;
  char *to = static_cast<char *>(arena.Allocate(n, 1));
  std::memcpy(to, s, n);
  return to;
}

}  // namespace

ObjectRegistry &ObjectRegistry::instance() {
  static ObjectRegistry *registry = new ObjectRegistry;  // used from host destructors: never destroyed
  return *registry;
}

void ObjectRegistry::add(const void *address, const char *uniqueId, const char *kind) {
  if (!kind) kind = "";
  std::lock_guard lock(mutex_);
  // A few kinds among many objects: each kept once.
  if (!lastKind_ || std::strcmp(lastKind_, kind) != 0) {
    auto known = std::find_if(kinds_.begin(), kinds_.end(), [&](const std::string &k) { return k == kind; });
    lastKind_ = (known != kinds_.end() ? *known : kinds_.emplace_back(kind)).c_str();
  }
  log_.push_back({address, copyInto(*strings_, uniqueId ? uniqueId : ""), lastKind_, kUnsettled});
  // A program that registers again and again without looking anything up: bounded all the same.
  if (log_.size() > std::max<size_t>(4096, 2 * table_.size())) compact();
}

void ObjectRegistry::compact() {
  if (log_.empty()) return;
  auto byAddress = [](const Registration &a, const Registration &b) { return a.address < b.address; };
  if (!std::is_sorted(log_.begin(), log_.end(), byAddress))  // a library registers its objects in order
    std::stable_sort(log_.begin(), log_.end(), byAddress);
  // Merged into the spare buffer, which keeps its memory: no fresh pages for each merge.
  std::vector<Registration> merged = std::move(spare_);
  merged.clear();
  merged.reserve(table_.size() + log_.size());
  // The later registration of an address wins: the log's over the table's, the log's last.
  size_t t = 0;
  for (size_t l = 0; l < log_.size(); ++l) {
    if (l + 1 < log_.size() && log_[l + 1].address == log_[l].address) {
      ++replaced_;
      continue;
    }
    while (t < table_.size() && table_[t].address < log_[l].address) merged.push_back(table_[t++]);
    if (t < table_.size() && table_[t].address == log_[l].address) {
      ++t;
      ++replaced_;
    }
    merged.push_back(log_[l]);
  }
  merged.insert(merged.end(), table_.begin() + static_cast<ptrdiff_t>(t), table_.end());
  log_.clear();
  spare_ = std::move(table_);
  table_ = std::move(merged);
  // Once replaced registrations' strings are most of the arena, those still used move to a new one.
  if (replaced_ > table_.size()) {
    auto arena = std::make_unique<llvm::BumpPtrAllocator>();
    for (Registration &r : table_) r.uniqueId = copyInto(*arena, r.uniqueId);
    strings_ = std::move(arena);
    replaced_ = 0;
  }
}

void ObjectRegistry::settle() {
  const bool logged = !log_.empty();
  compact();
  const uint64_t generation = host::loadedObjectsGeneration();
  if (!logged && generation == settledGeneration_) return;
  std::vector<HostObject> now;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) -> int {
        HostObject object{info->dlpi_addr, info->dlpi_name ? info->dlpi_name : "", {}};
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            const uintptr_t begin = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            object.segments.emplace_back(begin, begin + info->dlpi_phdr[i].p_memsz);
          }
        static_cast<std::vector<HostObject> *>(data)->push_back(std::move(object));
        return 0;
      },
      &now);
  // Where each object known before is now (kNoObject: unloaded).
  std::vector<uint32_t> moved(objects_.size(), kNoObject);
  for (size_t i = 0; i < objects_.size(); ++i)
    for (size_t j = 0; j < now.size(); ++j)
      if (objects_[i].base == now[j].base && objects_[i].name == now[j].name) moved[i] = static_cast<uint32_t>(j);
  // The segments sorted by where they begin: an address's owner is found by bisection.
  struct Segment {
    uintptr_t begin, end;
    uint32_t object;
  };
  std::vector<Segment> segments;
  for (size_t j = 0; j < now.size(); ++j)
    for (const auto &[begin, end] : now[j].segments) segments.push_back({begin, end, static_cast<uint32_t>(j)});
  std::sort(segments.begin(), segments.end(), [](const Segment &a, const Segment &b) { return a.begin < b.begin; });
  auto ownerOf = [&](const void *address) {
    const auto a = reinterpret_cast<uintptr_t>(address);
    auto after = std::upper_bound(segments.begin(), segments.end(), a,
                                  [](uintptr_t value, const Segment &s) { return value < s.begin; });
    if (after == segments.begin() || a >= std::prev(after)->end) return kNoObject;
    return std::prev(after)->object;
  };
  std::erase_if(table_, [&](Registration &r) {
    if (r.owner == kUnsettled) {
      r.owner = ownerOf(r.address);
      return false;
    }
    if (r.owner == kNoObject) return false;  // not in a host object (the heap): kept
    r.owner = moved[r.owner];
    return r.owner == kNoObject;  // its host object was unloaded: it leaves with it
  });
  objects_ = std::move(now);
  settledGeneration_ = generation;
}

std::optional<ObjectRegistry::Entry> ObjectRegistry::find(const void *address) {
  std::lock_guard lock(mutex_);
  settle();
  auto it = std::lower_bound(table_.begin(), table_.end(), address,
                             [](const Registration &r, const void *a) { return r.address < a; });
  if (it == table_.end() || it->address != address) return std::nullopt;
  return Entry{it->uniqueId, it->kind};
}

size_t ObjectRegistry::size() {
  std::lock_guard lock(mutex_);
  settle();
  return table_.size();
}

}  // namespace devdl::host
