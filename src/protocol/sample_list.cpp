// protocol::sample_list: an eval's samples as one buffer of ids with their ends, and a side
// table of the few that carry tags or metadata.
#include <mira/protocol/types.hpp>

#include <algorithm>
#include <stdexcept>

namespace mira::protocol {

sample_list::sample_list(std::initializer_list<sample_info> samples) {
  reserve(samples.size());
  for (const auto& s : samples) push_back(s);
}

std::string_view sample_list::id(std::size_t i) const noexcept {
  const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
  return std::string_view(ids_).substr(begin, ends_[i] - begin);
}

const sample_list::extras* sample_list::extras_of(std::size_t i) const {
  auto it = std::lower_bound(extras_.begin(), extras_.end(), i,
                             [](const auto& e, std::size_t n) { return e.first < n; });
  return it != extras_.end() && it->first == i ? &it->second : nullptr;
}

const std::vector<std::string>& sample_list::tags(std::size_t i) const {
  static const std::vector<std::string> none;
  auto* e = extras_of(i);
  return e ? e->tags : none;
}

const json::object& sample_list::metadata(std::size_t i) const {
  static const json::object none;
  auto* e = extras_of(i);
  return e ? e->metadata : none;
}

const sample_info sample_list::operator[](std::size_t i) const {
  sample_info s{std::string(id(i)), {}, {}};
  if (auto* e = extras_of(i)) {
    s.tags = e->tags;
    s.metadata = e->metadata;
  }
  return s;
}

const sample_info sample_list::at(std::size_t i) const {
  if (i >= size())
    throw std::out_of_range("sample_list::at: " + std::to_string(i) + " of " +
                            std::to_string(size()));
  return (*this)[i];
}

void sample_list::push_back(sample_info s) {
  ids_ += s.id;
  ends_.push_back(ids_.size());
  if (!s.tags.empty() || !s.metadata.empty())
    extras_.emplace_back(ends_.size() - 1, extras{std::move(s.tags), std::move(s.metadata)});
}

void sample_list::reserve(std::size_t samples) {
  ends_.reserve(samples);
}

void sample_list::clear() noexcept {
  std::string().swap(ids_);
  std::vector<std::size_t>().swap(ends_);
  std::vector<std::pair<std::size_t, extras>>().swap(extras_);
}

bool operator==(const sample_list& a, const sample_list& b) {
  if (a.ends_ != b.ends_ || a.ids_ != b.ids_ || a.extras_.size() != b.extras_.size()) return false;
  for (std::size_t i = 0; i < a.extras_.size(); ++i) {
    const auto& [ia, ea] = a.extras_[i];
    const auto& [ib, eb] = b.extras_[i];
    if (ia != ib || ea.tags != eb.tags || ea.metadata != eb.metadata) return false;
  }
  return true;
}

}  // namespace mira::protocol
